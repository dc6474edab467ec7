// Causal attention over a KV cache held in the shared memory, for query
// heads [itemStart, itemEnd) of the batch (item = token * numHeads + head), so
// threads split the batch's heads. Layouts as AttentionKernel in
// src/kernels/types.ts: q, out: [tokens, numHeads * headDim] f32; keys, values:
// [slots, slotLength, numKVHeads * headDim] in the encoding kvEncoding names
// (0 f32, 1 f16 bits, 2 Q8_0 blocks of 32 along each position's row: f16 scale,
// 32 int8); positions, seqIds: [tokens] i32.
// Dot products and the weighted sum of values run in f32x4 (halves and int8
// widened to f32 four at a time); the softmax's exponentials and their sum in
// f64, as the reference does.

import { halfToFloat, halvesToFloats } from "./half";

/** q · k over `count` floats. */
function dotFloats(a: usize, b: usize, count: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let i = 0;
  for (; i + 8 <= count; i += 8) {
    acc0 = f32x4.add(acc0, f32x4.mul(v128.load(a, 0), v128.load(b, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(v128.load(a, 16), v128.load(b, 16)));
    a += 32;
    b += 32;
  }
  const acc = f32x4.add(acc0, acc1);
  const pairs = f32x4.add(acc, i32x4.shuffle(acc, acc, 2, 3, 0, 1));
  let sum = f32x4.extract_lane(pairs, 0) + f32x4.extract_lane(pairs, 1);
  for (; i < count; i++) {
    sum += load<f32>(a) * load<f32>(b);
    a += 4;
    b += 4;
  }
  return sum;
}

/** q · k over `count` elements, q f32 and k f16 bits. */
function dotHalves(a: usize, b: usize, count: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let i = 0;
  for (; i + 8 <= count; i += 8) {
    const bits = v128.load(b);
    acc0 = f32x4.add(acc0, f32x4.mul(v128.load(a, 0), halvesToFloats(i32x4.extend_low_i16x8_u(bits))));
    acc1 = f32x4.add(acc1, f32x4.mul(v128.load(a, 16), halvesToFloats(i32x4.extend_high_i16x8_u(bits))));
    a += 32;
    b += 16;
  }
  const acc = f32x4.add(acc0, acc1);
  const pairs = f32x4.add(acc, i32x4.shuffle(acc, acc, 2, 3, 0, 1));
  let sum = f32x4.extract_lane(pairs, 0) + f32x4.extract_lane(pairs, 1);
  for (; i < count; i++) {
    sum += load<f32>(a) * halfToFloat(<u32>load<u16>(b));
    a += 4;
    b += 2;
  }
  return sum;
}

/** out[i] += weight * v[i] for `count` elements, v f16 bits. */
function addScaledHalves(out: usize, v: usize, weight: f32, count: i32): void {
  const w = f32x4.splat(weight);
  let i = 0;
  for (; i + 4 <= count; i += 4) {
    const halves = halvesToFloats(i32x4.extend_low_i16x8_u(v128.load64_zero(v)));
    v128.store(out, f32x4.add(v128.load(out), f32x4.mul(w, halves)));
    out += 16;
    v += 8;
  }
  for (; i < count; i++) {
    store<f32>(out, load<f32>(out) + weight * halfToFloat(<u32>load<u16>(v)));
    out += 4;
    v += 2;
  }
}

const Q8_BLOCK: i32 = 32;
const Q8_BLOCK_BYTES: usize = 34;

/** Four int8 at p as four f32. */
function int8sToFloats(p: usize): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(p))));
}

/**
 * q · k over `count` elements of a Q8_0 row from element `start` (a head's
 * slice, which may begin and end inside a block): per block, the int8 dot
 * product in f32 times the block's scale.
 */
function dotQ8(q: usize, row: usize, start: i32, count: i32): f32 {
  let sum: f32 = 0;
  const end = start + count;
  for (let e = start; e < end; ) {
    const block = e / Q8_BLOCK;
    const segmentEnd = min(end, (block + 1) * Q8_BLOCK);
    const base = row + <usize>block * Q8_BLOCK_BYTES;
    let p = base + 2 + <usize>(e % Q8_BLOCK);
    const n = segmentEnd - e;
    let acc = f32x4.splat(0);
    let i = 0;
    for (; i + 4 <= n; i += 4) {
      acc = f32x4.add(acc, f32x4.mul(v128.load(q), int8sToFloats(p)));
      q += 16;
      p += 4;
    }
    const pairs = f32x4.add(acc, i32x4.shuffle(acc, acc, 2, 3, 0, 1));
    let part = f32x4.extract_lane(pairs, 0) + f32x4.extract_lane(pairs, 1);
    for (; i < n; i++) {
      part += load<f32>(q) * <f32>load<i8>(p);
      q += 4;
      p += 1;
    }
    sum += part * halfToFloat(<u32>load<u16>(base));
    e = segmentEnd;
  }
  return sum;
}

/** out[i] += weight * v[i] for `count` elements of a Q8_0 row from element `start`. */
function addScaledQ8(out: usize, row: usize, start: i32, weight: f32, count: i32): void {
  const end = start + count;
  for (let e = start; e < end; ) {
    const block = e / Q8_BLOCK;
    const segmentEnd = min(end, (block + 1) * Q8_BLOCK);
    const base = row + <usize>block * Q8_BLOCK_BYTES;
    let p = base + 2 + <usize>(e % Q8_BLOCK);
    const n = segmentEnd - e;
    const scaled: f32 = weight * halfToFloat(<u32>load<u16>(base));
    const w = f32x4.splat(scaled);
    let i = 0;
    for (; i + 4 <= n; i += 4) {
      v128.store(out, f32x4.add(v128.load(out), f32x4.mul(w, int8sToFloats(p))));
      out += 16;
      p += 4;
    }
    for (; i < n; i++) {
      store<f32>(out, load<f32>(out) + scaled * <f32>load<i8>(p));
      out += 4;
      p += 1;
    }
    e = segmentEnd;
  }
}

/** out[i] += weight * v[i] for `count` floats. */
function addScaled(out: usize, v: usize, weight: f32, count: i32): void {
  const w = f32x4.splat(weight);
  let i = 0;
  for (; i + 4 <= count; i += 4) {
    v128.store(out, f32x4.add(v128.load(out), f32x4.mul(w, v128.load(v))));
    out += 16;
    v += 16;
  }
  for (; i < count; i++) {
    store<f32>(out, load<f32>(out) + weight * load<f32>(v));
    out += 4;
    v += 4;
  }
}

/** scores: this thread's scratch of slotLength f64. */
export function attention(
  out: usize,
  q: usize,
  keys: usize,
  values: usize,
  positions: usize,
  seqIds: usize,
  numHeads: i32,
  numKVHeads: i32,
  headDim: i32,
  slotLength: i32,
  scale: f32,
  window: i32,
  softcap: f32,
  scores: usize,
  itemStart: i32,
  itemEnd: i32,
  kvEncoding: i32,
): void {
  const group = numHeads / numKVHeads;
  const kvDim = numKVHeads * headDim;
  // Bytes per cached position, and to a KV head's first element (Q8_0: its row's start; dotQ8 finds the head).
  const q8 = kvEncoding == 2;
  const kvStride: usize = q8 ? <usize>(kvDim / Q8_BLOCK) * Q8_BLOCK_BYTES : <usize>kvDim * (kvEncoding == 1 ? 2 : 4);
  const headBytes = <usize>headDim * 4; // of q and out
  const kvHeadBytes: usize = q8 ? 0 : <usize>headDim * (kvEncoding == 1 ? 2 : 4);
  for (let item = itemStart; item < itemEnd; item++) {
    const t = item / numHeads;
    const h = item % numHeads;
    const position = load<i32>(positions + (<usize>t << 2));
    const slot = load<i32>(seqIds + (<usize>t << 2));
    const first = window > 0 ? max(0, position - window + 1) : 0;
    const qRow = q + <usize>item * headBytes;
    const outRow = out + <usize>item * headBytes;
    const kvHead = h / group;
    const headOffset = <usize>kvHead * kvHeadBytes;
    const headStart = kvHead * headDim; // element of the row where this KV head starts (Q8_0)
    const slotKeys = keys + <usize>slot * <usize>slotLength * kvStride + headOffset;
    const slotValues = values + <usize>slot * <usize>slotLength * kvStride + headOffset;

    let best: f64 = -Infinity;
    for (let j = first; j <= position; j++) {
      const keyRow = slotKeys + <usize>j * kvStride;
      const dot = q8
        ? dotQ8(qRow, keyRow, headStart, headDim)
        : kvEncoding == 1
          ? dotHalves(qRow, keyRow, headDim)
          : dotFloats(qRow, keyRow, headDim);
      let score = <f64>(dot * scale);
      if (softcap > 0) score = <f64>softcap * Math.tanh(score / <f64>softcap);
      store<f64>(scores + (<usize>(j - first) << 3), score);
      if (score > best) best = score;
    }
    let total: f64 = 0;
    for (let j = first; j <= position; j++) {
      const at = scores + (<usize>(j - first) << 3);
      const e = Math.exp(load<f64>(at) - best);
      store<f64>(at, e);
      total += e;
    }
    memory.fill(outRow, 0, headBytes);
    const inverse = 1 / total;
    for (let j = first; j <= position; j++) {
      const weight = <f32>(load<f64>(scores + (<usize>(j - first) << 3)) * inverse);
      const valueRow = slotValues + <usize>j * kvStride;
      if (q8) addScaledQ8(outRow, valueRow, headStart, weight, headDim);
      else if (kvEncoding == 1) addScaledHalves(outRow, valueRow, weight, headDim);
      else addScaled(outRow, valueRow, weight, headDim);
    }
  }
}
