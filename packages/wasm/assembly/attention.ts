// Causal attention over a KV cache held in the shared memory, for query
// heads [itemStart, itemEnd) of the batch (item = token * numHeads + head), so
// threads split the batch's heads. Layouts as AttentionKernel in
// src/kernels/types.ts: q, out: [tokens, numHeads * headDim] f32; keys, values:
// [slots, slotLength, numKVHeads * headDim] f32, or f16 bits when halfCache is
// set; positions, seqIds: [tokens] i32.
// Dot products and the weighted sum of values run in f32x4 (halves widened to
// f32 four at a time); the softmax's exponentials and their sum in f64, as the
// reference does.

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
  halfCache: i32,
): void {
  const group = numHeads / numKVHeads;
  const elementBytes: usize = halfCache ? 2 : 4; // of keys and values
  const kvStride = <usize>(numKVHeads * headDim) * elementBytes; // bytes per cached position
  const headBytes = <usize>headDim * 4; // of q and out
  const kvHeadBytes = <usize>headDim * elementBytes;
  for (let item = itemStart; item < itemEnd; item++) {
    const t = item / numHeads;
    const h = item % numHeads;
    const position = load<i32>(positions + (<usize>t << 2));
    const slot = load<i32>(seqIds + (<usize>t << 2));
    const first = window > 0 ? max(0, position - window + 1) : 0;
    const qRow = q + <usize>item * headBytes;
    const outRow = out + <usize>item * headBytes;
    const headOffset = <usize>(h / group) * kvHeadBytes;
    const slotKeys = keys + <usize>slot * <usize>slotLength * kvStride + headOffset;
    const slotValues = values + <usize>slot * <usize>slotLength * kvStride + headOffset;

    let best: f64 = -Infinity;
    for (let j = first; j <= position; j++) {
      const keyRow = slotKeys + <usize>j * kvStride;
      const dot = halfCache ? dotHalves(qRow, keyRow, headDim) : dotFloats(qRow, keyRow, headDim);
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
      if (halfCache) addScaledHalves(outRow, valueRow, weight, headDim);
      else addScaled(outRow, valueRow, weight, headDim);
    }
  }
}
