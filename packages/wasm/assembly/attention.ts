// Causal attention over a KV cache held in the shared memory, for the batch's
// (token, KV head) items [itemStart, itemEnd) (item = token * numKVHeads +
// kvHead, each with the query heads that share the KV head), so threads split
// the batch's KV heads. Layouts as AttentionKernel in
// src/kernels/types.ts: q, out: [tokens, numHeads * headDim] f32; keys, values:
// [slots, slotLength, numKVHeads * headDim] in the encoding kvEncoding names
// (0 f32, 1 f16 bits, 2 Q8_0 blocks of 32 along each position's row: f16 scale,
// 32 int8); positions, seqIds: [tokens] i32.
// Every pass runs on f32 rows: an f16 or Q8_0 cache's block of 64 positions of
// a KV head is decoded to f32 first (exactly: halves in five instructions per
// four where the block holds no infinity or NaN; int8 times the block's half),
// once for all the query heads that read it. Dot products and the weighted sum
// of values run in f32x4, four keys per pass, two query heads at a time;
// the softmax in f32x4 too, with a polynomial exponential (exp4). A group's
// query heads take each block of 64 positions in turn, so the block is read
// from memory once and from the L1 cache by the rest (one query head at a
// time would reread its KV head's keys and values, which at long contexts
// outgrow the L2 cache, once per query head).

import { horizontalSum } from "./dot";
import { exp4 } from "./exp";
import { FINITE_MASK, finiteHalvesWith, halfConstant, halfToFloat, halvesToFloats, MAGNITUDE_BITS, upperHalves } from "./half";
import { sumLanes4f } from "./tile";

const Q8_BLOCK: i32 = 32;
/** kvEncoding values (KVBuffer's): f32, f16 bits and Q8_0 blocks. */
const KV_F32 = 0;
const KV_F16 = 1;
const KV_Q8_0 = 2;
const Q8_BLOCK_BYTES: usize = 34;

/** Four int8 at p as four f32. */
function int8sToFloats(p: usize): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(p))));
}

/**
 * Elements [headStart, headStart + headDim) of `count` Q8_0 rows (stride bytes
 * apart from `rows`) as f32 rows of headDim at `out`: q times its block's
 * scale, exact in f32 (an int8 times a half), so attention then runs the f32
 * path on the very values the cache holds. A head may begin and end inside a block.
 */
function decodeQ8Rows(out: usize, rows: usize, stride: usize, count: i32, headStart: i32, headDim: i32): void {
  const end = headStart + headDim;
  for (let j = 0; j < count; j++) {
    const row = rows + <usize>j * stride;
    for (let e = headStart; e < end; ) {
      const block = e / Q8_BLOCK;
      const segmentEnd = min(end, (block + 1) * Q8_BLOCK);
      const base = row + <usize>block * Q8_BLOCK_BYTES;
      let p = base + 2 + <usize>(e % Q8_BLOCK);
      const n = segmentEnd - e;
      const scale = halfToFloat(<u32>load<u16>(base));
      let i = 0;
      for (; i + 4 <= n; i += 4) {
        v128.store(out, f32x4.mul(int8sToFloats(p), f32x4.splat(scale)));
        out += 16;
        p += 4;
      }
      for (; i < n; i++) {
        store<f32>(out, <f32>load<i8>(p) * scale);
        out += 4;
        p += 1;
      }
      e = segmentEnd;
    }
  }
}

/**
 * `count` f16 rows' headDim halves (stride bytes apart from `rows`) as f32 rows
 * of headDim at `out`, exactly: in five instructions per four halves (the F16
 * decode rows' conversion, right for every finite half) while tracking the
 * largest magnitude, and again with the full conversion if the block holds an
 * infinity or NaN (exponent 31), which a cache written from finite floats
 * within f16's range never does.
 */
function decodeHalfRows(out: usize, rows: usize, stride: usize, count: i32, headDim: i32): void {
  let largest = i16x8.splat(0);
  // Loaded once: V8 rebuilds an inline vector constant at each use.
  const magnitudeBits = halfConstant(MAGNITUDE_BITS);
  const mask = halfConstant(FINITE_MASK);
  const scale = halfConstant(0);
  for (let j = 0; j < count; j++) {
    const row = rows + <usize>j * stride;
    const to = out + <usize>j * <usize>headDim * 4;
    let i = 0;
    for (; i + 8 <= headDim; i += 8) {
      const bits = v128.load(row + (<usize>i << 1));
      largest = i16x8.max_u(largest, v128.and(bits, magnitudeBits));
      v128.store(to + (<usize>i << 2), finiteHalvesWith(upperHalves(bits, false), mask, scale));
      v128.store(to + (<usize>i << 2), finiteHalvesWith(upperHalves(bits, true), mask, scale), 16);
    }
    for (; i < headDim; i++) store<f32>(to + (<usize>i << 2), halfToFloat(<u32>load<u16>(row + (<usize>i << 1))));
  }
  if (i16x8.bitmask(i16x8.ge_u(largest, i16x8.splat(0x7c00))) == 0) return;
  for (let j = 0; j < count; j++) {
    const row = rows + <usize>j * stride;
    const to = out + <usize>j * <usize>headDim * 4;
    let i = 0;
    for (; i + 4 <= headDim; i += 4) v128.store(to + (<usize>i << 2), halvesToFloats(i32x4.extend_low_i16x8_u(v128.load64_zero(row + (<usize>i << 1)))));
    for (; i < headDim; i++) store<f32>(to + (<usize>i << 2), halfToFloat(<u32>load<u16>(row + (<usize>i << 1))));
  }
}

/**
 * One block of `count` cached rows of a KV head (f16 or Q8_0, stride bytes
 * apart from `rows`; a Q8_0 head's elements start at headStart of the row) as
 * f32 rows of headDim at `out`, so that every encoding then runs the f32 passes
 * on the values the cache holds: the same outputs as an f32 cache of them.
 */
function decodeBlock(kvEncoding: i32, out: usize, rows: usize, stride: usize, count: i32, headStart: i32, headDim: i32): void {
  if (kvEncoding == KV_F16) decodeHalfRows(out, rows, stride, count, headDim);
  else decodeQ8Rows(out, rows, stride, count, headStart, headDim);
}

/** The f32 at byte offset o of four rows, k0..k3, as one f32x4 (lane k from row k). */
function column4(k0: usize, k1: usize, k2: usize, k3: usize, o: usize): v128 {
  let k = f32x4.splat(load<f32>(k0 + o));
  k = f32x4.replace_lane(k, 1, load<f32>(k1 + o));
  k = f32x4.replace_lane(k, 2, load<f32>(k2 + o));
  return f32x4.replace_lane(k, 3, load<f32>(k3 + o));
}

/** Lane k = q · (the row at k0 + k * stride) over `count` elements: four rows per pass over q. */
function dotRows4(q: usize, k0: usize, stride: usize, count: i32): v128 {
  const k1 = k0 + stride;
  const k2 = k1 + stride;
  const k3 = k2 + stride;
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= count; i += 4) {
    const o = <usize>i << 2;
    const x = v128.load(q + o);
    a0 = f32x4.add(a0, f32x4.mul(x, v128.load(k0 + o)));
    a1 = f32x4.add(a1, f32x4.mul(x, v128.load(k1 + o)));
    a2 = f32x4.add(a2, f32x4.mul(x, v128.load(k2 + o)));
    a3 = f32x4.add(a3, f32x4.mul(x, v128.load(k3 + o)));
  }
  let sums = sumLanes4f(a0, a1, a2, a3);
  for (; i < count; i++) {
    const o = <usize>i << 2;
    sums = f32x4.add(sums, f32x4.mul(f32x4.splat(load<f32>(q + o)), column4(k0, k1, k2, k3, o)));
  }
  return sums;
}

/** q · one cached row: lane 0 of dotRows4 with the row in every lane (the same arithmetic, for the last n % 4 keys). */
function dotKey(q: usize, k: usize, count: i32): f32 {
  return f32x4.extract_lane(dotRows4(q, k, 0, count), 0);
}

/**
 * out[0..count) += sum over n positions of weights[j] * (the cached row at
 * v + j * stride), in position order: a chunk of 16 (then 4) output floats
 * stays in registers across the n positions, so out is read and written once.
 * Called block after block of positions, the running sums continue exactly as
 * one call over all of them would.
 */
function addWeightedSum(out: usize, weights: usize, v: usize, stride: usize, n: i32, count: i32): void {
  let d = 0;
  for (; d + 16 <= count; d += 16) {
    const at = out + (<usize>d << 2);
    let a0 = v128.load(at, 0);
    let a1 = v128.load(at, 16);
    let a2 = v128.load(at, 32);
    let a3 = v128.load(at, 48);
    let row = v + (<usize>d << 2);
    const e: usize = 16; // bytes of four f32
    for (let j = 0; j < n; j++) {
      const w = v128.load32_splat(weights + (<usize>j << 2));
      a0 = f32x4.add(a0, f32x4.mul(w, v128.load(row)));
      a1 = f32x4.add(a1, f32x4.mul(w, v128.load(row + e)));
      a2 = f32x4.add(a2, f32x4.mul(w, v128.load(row + 2 * e)));
      a3 = f32x4.add(a3, f32x4.mul(w, v128.load(row + 3 * e)));
      row += stride;
    }
    v128.store(at, a0, 0);
    v128.store(at, a1, 16);
    v128.store(at, a2, 32);
    v128.store(at, a3, 48);
  }
  for (; d + 4 <= count; d += 4) {
    const at = out + (<usize>d << 2);
    let a0 = v128.load(at);
    let row = v + (<usize>d << 2);
    for (let j = 0; j < n; j++) {
      a0 = f32x4.add(a0, f32x4.mul(v128.load32_splat(weights + (<usize>j << 2)), v128.load(row)));
      row += stride;
    }
    v128.store(at, a0);
  }
  for (; d < count; d++) {
    const at = out + (<usize>d << 2);
    let sum = load<f32>(at);
    let row = v + (<usize>d << 2);
    for (let j = 0; j < n; j++) {
      sum += load<f32>(weights + (<usize>j << 2)) * load<f32>(row);
      row += stride;
    }
    store<f32>(at, sum);
  }
}

/**
 * addWeightedSum for two query heads at once (weights0 into out0, weights1 into
 * out1) over the same values: each value vector loaded feeds both, and the two
 * heads' eight running sums are independent chains. Per head the arithmetic of
 * addWeightedSum, so the same bits.
 */
function addWeightedSumPair(out0: usize, out1: usize, weights0: usize, weights1: usize, v: usize, stride: usize, n: i32, count: i32): void {
  let d = 0;
  for (; d + 16 <= count; d += 16) {
    const at0 = out0 + (<usize>d << 2);
    const at1 = out1 + (<usize>d << 2);
    let a0 = v128.load(at0, 0);
    let a1 = v128.load(at0, 16);
    let a2 = v128.load(at0, 32);
    let a3 = v128.load(at0, 48);
    let b0 = v128.load(at1, 0);
    let b1 = v128.load(at1, 16);
    let b2 = v128.load(at1, 32);
    let b3 = v128.load(at1, 48);
    let row = v + (<usize>d << 2);
    const e: usize = 16; // bytes of four f32
    for (let j = 0; j < n; j++) {
      const wa = v128.load32_splat(weights0 + (<usize>j << 2));
      const wb = v128.load32_splat(weights1 + (<usize>j << 2));
      const r0 = v128.load(row);
      const r1 = v128.load(row + e);
      const r2 = v128.load(row + 2 * e);
      const r3 = v128.load(row + 3 * e);
      a0 = f32x4.add(a0, f32x4.mul(wa, r0));
      b0 = f32x4.add(b0, f32x4.mul(wb, r0));
      a1 = f32x4.add(a1, f32x4.mul(wa, r1));
      b1 = f32x4.add(b1, f32x4.mul(wb, r1));
      a2 = f32x4.add(a2, f32x4.mul(wa, r2));
      b2 = f32x4.add(b2, f32x4.mul(wb, r2));
      a3 = f32x4.add(a3, f32x4.mul(wa, r3));
      b3 = f32x4.add(b3, f32x4.mul(wb, r3));
      row += stride;
    }
    v128.store(at0, a0, 0);
    v128.store(at0, a1, 16);
    v128.store(at0, a2, 32);
    v128.store(at0, a3, 48);
    v128.store(at1, b0, 0);
    v128.store(at1, b1, 16);
    v128.store(at1, b2, 32);
    v128.store(at1, b3, 48);
  }
  // The last count % 16 elements one head at a time (each element's sum is its own).
  const rest = v + (<usize>d << 2);
  addWeightedSum(out0 + (<usize>d << 2), weights0, rest, stride, n, count - d);
  addWeightedSum(out1 + (<usize>d << 2), weights1, rest, stride, n, count - d);
}

/**
 * scoreKeys for two query rows at once (q0 into scores0, q1 into scores1) over
 * the same keys: each key vector loaded feeds both. Per query the arithmetic of
 * scoreKeys, so the same bits.
 */
function scoreKeysPair(scores0: usize, scores1: usize, q0: usize, q1: usize, keys: usize, stride: usize, n: i32, headDim: i32, scale: f32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const k0 = keys + <usize>j * stride;
    const k1 = k0 + stride;
    const k2 = k1 + stride;
    const k3 = k2 + stride;
    let a0 = f32x4.splat(0);
    let a1 = a0;
    let a2 = a0;
    let a3 = a0;
    let b0 = a0;
    let b1 = a0;
    let b2 = a0;
    let b3 = a0;
    let i = 0;
    for (; i + 4 <= headDim; i += 4) {
      const o = <usize>i << 2;
      const x = v128.load(q0 + o);
      const y = v128.load(q1 + o);
      const r0 = v128.load(k0 + o);
      const r1 = v128.load(k1 + o);
      const r2 = v128.load(k2 + o);
      const r3 = v128.load(k3 + o);
      a0 = f32x4.add(a0, f32x4.mul(x, r0));
      b0 = f32x4.add(b0, f32x4.mul(y, r0));
      a1 = f32x4.add(a1, f32x4.mul(x, r1));
      b1 = f32x4.add(b1, f32x4.mul(y, r1));
      a2 = f32x4.add(a2, f32x4.mul(x, r2));
      b2 = f32x4.add(b2, f32x4.mul(y, r2));
      a3 = f32x4.add(a3, f32x4.mul(x, r3));
      b3 = f32x4.add(b3, f32x4.mul(y, r3));
    }
    let sums0 = sumLanes4f(a0, a1, a2, a3);
    let sums1 = sumLanes4f(b0, b1, b2, b3);
    for (; i < headDim; i++) {
      const o = <usize>i << 2;
      const k = column4(k0, k1, k2, k3, o);
      sums0 = f32x4.add(sums0, f32x4.mul(f32x4.splat(load<f32>(q0 + o)), k));
      sums1 = f32x4.add(sums1, f32x4.mul(f32x4.splat(load<f32>(q1 + o)), k));
    }
    v128.store(scores0 + (<usize>j << 2), f32x4.mul(sums0, f32x4.splat(scale)));
    v128.store(scores1 + (<usize>j << 2), f32x4.mul(sums1, f32x4.splat(scale)));
  }
  for (; j < n; j++) {
    const k = keys + <usize>j * stride;
    store<f32>(scores0 + (<usize>j << 2), dotKey(q0, k, headDim) * scale);
    store<f32>(scores1 + (<usize>j << 2), dotKey(q1, k, headDim) * scale);
  }
}

/** Scores of the n cached keys from `keys` for one query row, scaled, into scores[0..n) (f32). */
function scoreKeys(scores: usize, q: usize, keys: usize, stride: usize, n: i32, headDim: i32, scale: f32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    v128.store(scores + (<usize>j << 2), f32x4.mul(dotRows4(q, keys + <usize>j * stride, stride, headDim), f32x4.splat(scale)));
  }
  for (; j < n; j++) store<f32>(scores + (<usize>j << 2), dotKey(q, keys + <usize>j * stride, headDim) * scale);
}

/** The largest of scores[0..n) (f32). */
function maxOf(scores: usize, n: i32): f32 {
  let best = f32x4.splat(-Infinity);
  let j = 0;
  for (; j + 4 <= n; j += 4) best = f32x4.max(best, v128.load(scores + (<usize>j << 2)));
  best = f32x4.max(best, i32x4.shuffle(best, best, 2, 3, 0, 1));
  best = f32x4.max(best, i32x4.shuffle(best, best, 1, 0, 3, 2));
  let top = f32x4.extract_lane(best, 0);
  for (; j < n; j++) top = max(top, load<f32>(scores + (<usize>j << 2)));
  return top;
}

/** scores[j] = e^(scores[j] - top) in place over [0, n); returns their sum. */
function exponentiate(scores: usize, n: i32, top: f32): f32 {
  const topVector = f32x4.splat(top);
  let total = f32x4.splat(0);
  const whole = n & ~3;
  let j = 0;
  for (; j < whole; j += 4) {
    const at = scores + (<usize>j << 2);
    const e = exp4(f32x4.sub(v128.load(at), topVector));
    v128.store(at, e);
    total = f32x4.add(total, e);
  }
  let sum = horizontalSum(total);
  for (; j < n; j++) {
    const at = scores + (<usize>j << 2);
    const e = f32x4.extract_lane(exp4(f32x4.splat(load<f32>(at) - top)), 0);
    store<f32>(at, e);
    sum += e;
  }
  return sum;
}

/** values[0..n) (f32) *= factor. */
function scaleInPlace(values: usize, n: i32, factor: f32): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const at = values + (<usize>j << 2);
    v128.store(at, f32x4.mul(v128.load(at), f32x4.splat(factor)));
  }
  for (; j < n; j++) {
    const at = values + (<usize>j << 2);
    store<f32>(at, load<f32>(at) * factor);
  }
}

/**
 * Softmax in place over scores[0..n) (f32): the weights that sum to one.
 * The maximum is subtracted first, so every exponent is <= 0.
 */
function softmaxInPlace(scores: usize, n: i32): void {
  const sum = exponentiate(scores, n, maxOf(scores, n));
  scaleInPlace(scores, n, 1 / sum);
}

/**
 * Positions per block: one block's keys or values of a KV head (64 x headDim
 * elements; from an f16 or Q8_0 cache, decoded to f32 first) stay in the L1 cache while
 * every query head of its group reads them, so the cache is read from memory
 * once per token.
 */
const POSITION_BLOCK = 64;

/**
 * Positions per chunk. A token that sees more positions than this has them
 * split into chunks, each its own item, so that threads share even a single
 * token's attention (decode, with fewer KV heads than threads or not a
 * multiple of them); each chunk leaves a partial record, which
 * attentionCombine merges. The split depends on the positions alone, not on
 * the threads, so every thread count gives the same bits.
 */
const CHUNK_POSITIONS = 512;

/** Bytes of a chunk's partial record for one query head: the unnormalized sum of weighted values f32[headDim], then the chunk's largest score and the sum of its e^(score - largest), padded to 16 bytes. */
function partialRecordBytes(headDim: i32): usize {
  return <usize>headDim * 4 + 16;
}

/** Chunks a token that sees `positions` cached positions is split into (1 within CHUNK_POSITIONS). */
export function attentionChunks(positions: i32): i32 {
  return (positions + CHUNK_POSITIONS - 1) / CHUNK_POSITIONS;
}

/**
 * Bytes of one thread's scratch for attention (its `scores`): f32 scores of one
 * chunk for each of a group's query heads, then for an f16 or Q8_0 cache one
 * block of positions of a KV head decoded to f32.
 */
export function attentionScratchBytes(slotLength: i32, group: i32, headDim: i32, kvEncoding: i32): i32 {
  return min(slotLength, CHUNK_POSITIONS) * 4 * group + (kvEncoding == KV_F32 ? 0 : POSITION_BLOCK * headDim * 4);
}

/** Bytes of one partial record (partialRecordBytes): attention's `partials` holds [tokens][numHeads][chunks] of them. */
export function attentionRecordBytes(headDim: i32): i32 {
  return <i32>partialRecordBytes(headDim);
}

/**
 * Items are (token, KV head, chunk) triples, item = (token * numKVHeads +
 * kvHead) * chunks + chunk: each computes, over the chunk's positions, the
 * query heads that share the KV head (numHeads / numKVHeads of them); a chunk
 * past the token's last does nothing. scores: this thread's scratch of
 * group * min(slotLength, CHUNK_POSITIONS) f32, then for an f16 or Q8_0 cache
 * POSITION_BLOCK * headDim f32 for a block's decoded rows. partials: the
 * chunks' records, [tokens][numHeads][chunks] of partialRecordBytes. Items are
 * taken itemStart, itemStart + itemStep, ... below itemEnd: threads interleave
 * their items, so each gets as many early (short) as late (long) positions.
 */
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
  itemStep: i32,
  kvEncoding: i32,
  partials: usize,
  chunks: i32,
): void {
  const group = numHeads / numKVHeads;
  const kvDim = numKVHeads * headDim;
  // Bytes per cached position, and to a KV head's first element (Q8_0: its row's start; dotQ8 finds the head).
  const q8 = kvEncoding == KV_Q8_0;
  const kvStride: usize = q8 ? <usize>(kvDim / Q8_BLOCK) * Q8_BLOCK_BYTES : <usize>kvDim * (kvEncoding == KV_F16 ? 2 : 4);
  const headBytes = <usize>headDim * 4; // of q and out
  const kvHeadBytes: usize = q8 ? 0 : <usize>headDim * (kvEncoding == KV_F16 ? 2 : 4);
  const scoresBytes = <usize>min(slotLength, CHUNK_POSITIONS) * 4; // one query head's scores (an item scores one chunk)
  const decoded = scores + <usize>group * scoresBytes; // f16 / Q8_0: a block of keys or values as f32
  const recordBytes = partialRecordBytes(headDim);
  for (let item = itemStart; item < itemEnd; item += itemStep) {
    const chunk = item % chunks;
    const t = item / chunks / numKVHeads;
    const kvHead = (item / chunks) % numKVHeads;
    const position = load<i32>(positions + (<usize>t << 2));
    const slot = load<i32>(seqIds + (<usize>t << 2));
    const first = window > 0 ? max(0, position - window + 1) : 0;
    const visible = position - first + 1;
    const chunkCount = attentionChunks(visible);
    if (chunk >= chunkCount) continue;
    // This item's positions: [start, start + n) of the visible ones.
    const start = chunk * CHUNK_POSITIONS;
    const n = min(CHUNK_POSITIONS, visible - start);
    // The group's query heads are consecutive: heads kvHead * group .. + group - 1.
    const firstHead = <usize>t * <usize>numHeads + <usize>kvHead * <usize>group;
    const qRows = q + firstHead * headBytes;
    // Outputs: the heads' rows of out when one chunk covers the token, else their partial records.
    const whole = chunkCount == 1;
    const outRows = whole ? out + firstHead * headBytes : partials + (firstHead * <usize>chunks + <usize>chunk) * recordBytes;
    const outStride = whole ? headBytes : <usize>chunks * recordBytes;
    const headOffset = <usize>kvHead * kvHeadBytes;
    const headStart = kvHead * headDim; // element of the row where this KV head starts (Q8_0)
    const slotKeys = keys + (<usize>slot * <usize>slotLength + <usize>(first + start)) * kvStride + headOffset;
    const slotValues = values + (<usize>slot * <usize>slotLength + <usize>(first + start)) * kvStride + headOffset;

    // Scores of every query head of the group, a block of positions at a time.
    for (let j0 = 0; j0 < n; j0 += POSITION_BLOCK) {
      const blockKeys = slotKeys + <usize>j0 * kvStride;
      const count = min(POSITION_BLOCK, n - j0);
      const blockScores = scores + (<usize>j0 << 2);
      if (kvEncoding == KV_F32) scoreBlock(blockScores, scoresBytes, qRows, headBytes, group, blockKeys, kvStride, count, headDim, scale);
      else {
        decodeBlock(kvEncoding, decoded, blockKeys, kvStride, count, headStart, headDim);
        scoreBlock(blockScores, scoresBytes, qRows, headBytes, group, decoded, headBytes, count, headDim, scale);
      }
    }
    for (let h = 0; h < group; h++) {
      const headScores = scores + <usize>h * scoresBytes;
      if (softcap > 0) {
        for (let j = 0; j < n; j++) {
          const at = headScores + (<usize>j << 2);
          store<f32>(at, <f32>(<f64>softcap * Math.tanh(<f64>load<f32>(at) / <f64>softcap)));
        }
      }
      if (whole) softmaxInPlace(headScores, n);
      else {
        // e^(score - the chunk's largest), unnormalized: attentionCombine rescales each chunk.
        const record = outRows + <usize>h * outStride + headBytes;
        const top = maxOf(headScores, n);
        store<f32>(record, top);
        store<f32>(record, exponentiate(headScores, n, top), 4);
      }
    }
    // The weighted sums of the values, a block of positions at a time, each head's running sums
    // continuing from block to block.
    for (let h = 0; h < group; h++) memory.fill(outRows + <usize>h * outStride, 0, headBytes);
    for (let j0 = 0; j0 < n; j0 += POSITION_BLOCK) {
      const blockValues = slotValues + <usize>j0 * kvStride;
      const count = min(POSITION_BLOCK, n - j0);
      const blockWeights = scores + (<usize>j0 << 2);
      if (kvEncoding == KV_F32) addValuesBlock(outRows, outStride, blockWeights, scoresBytes, group, blockValues, kvStride, count, headDim);
      else {
        decodeBlock(kvEncoding, decoded, blockValues, kvStride, count, headStart, headDim);
        addValuesBlock(outRows, outStride, blockWeights, scoresBytes, group, decoded, headBytes, count, headDim);
      }
    }
  }
}

/**
 * Merges the partial records of every token whose visible positions span more
 * than one chunk into its rows of out: with M the largest of the chunks' largest
 * scores, out = sum_c e^(max_c - M) o_c / sum_c e^(max_c - M) s_c, in chunk order.
 * Runs on one thread after the chunks (a few multiplies per output element).
 */
export function attentionCombine(out: usize, partials: usize, positions: usize, tokens: i32, numHeads: i32, headDim: i32, window: i32, chunks: i32): void {
  const headBytes = <usize>headDim * 4;
  const recordBytes = partialRecordBytes(headDim);
  for (let t = 0; t < tokens; t++) {
    const position = load<i32>(positions + (<usize>t << 2));
    const first = window > 0 ? max(0, position - window + 1) : 0;
    const chunkCount = attentionChunks(position - first + 1);
    if (chunkCount == 1) continue;
    for (let h = 0; h < numHeads; h++) {
      const head = <usize>t * <usize>numHeads + <usize>h;
      const records = partials + head * <usize>chunks * recordBytes;
      const row = out + head * headBytes;
      let top: f32 = -Infinity;
      for (let c = 0; c < chunkCount; c++) top = max(top, load<f32>(records + <usize>c * recordBytes + headBytes));
      let total: f32 = 0;
      memory.fill(row, 0, headBytes);
      for (let c = 0; c < chunkCount; c++) {
        const record = records + <usize>c * recordBytes;
        const weight = f32x4.extract_lane(exp4(f32x4.splat(load<f32>(record + headBytes) - top)), 0);
        total += weight * load<f32>(record + headBytes, 4);
        addScaled(row, record, weight, headDim);
      }
      scaleInPlace(row, headDim, 1 / total);
    }
  }
}

/** out[0..count) += weight * v[0..count) (f32). */
function addScaled(out: usize, v: usize, weight: f32, count: i32): void {
  let d = 0;
  for (; d + 4 <= count; d += 4) {
    const o = <usize>d << 2;
    v128.store(out + o, f32x4.add(v128.load(out + o), f32x4.mul(v128.load(v + o), f32x4.splat(weight))));
  }
  for (; d < count; d++) {
    const o = <usize>d << 2;
    store<f32>(out + o, load<f32>(out + o) + load<f32>(v + o) * weight);
  }
}

/**
 * The scores of the `group` query heads (q rows at qRows, headBytes apart) for one block of
 * `count` f32 keys (kvStride bytes apart), into each head's scores (scoresBytes apart from
 * `scores`). Heads go two at a time, so each key vector loaded feeds both.
 */
function scoreBlock(scores: usize, scoresBytes: usize, qRows: usize, headBytes: usize, group: i32, keys: usize, kvStride: usize, count: i32, headDim: i32, scale: f32): void {
  for (let h = 0; h < group; ) {
    const qRow = qRows + <usize>h * headBytes;
    const headScores = scores + <usize>h * scoresBytes;
    const pair = h + 1 < group;
    if (pair) scoreKeysPair(headScores, headScores + scoresBytes, qRow, qRow + headBytes, keys, kvStride, count, headDim, scale);
    else scoreKeys(headScores, qRow, keys, kvStride, count, headDim, scale);
    h += pair ? 2 : 1;
  }
}

/**
 * The `group` heads' outputs (at outRows, outStride bytes apart) += their weights (scoresBytes
 * apart from `weights`) times one block of `count` f32 values (kvStride bytes apart); two heads
 * at a time, as scoreBlock.
 */
function addValuesBlock(outRows: usize, outStride: usize, weights: usize, scoresBytes: usize, group: i32, values: usize, kvStride: usize, count: i32, headDim: i32): void {
  for (let h = 0; h < group; ) {
    const outRow = outRows + <usize>h * outStride;
    const headWeights = weights + <usize>h * scoresBytes;
    const pair = h + 1 < group;
    if (pair) addWeightedSumPair(outRow, outRow + outStride, headWeights, headWeights + scoresBytes, values, kvStride, count, headDim);
    else addWeightedSum(outRow, headWeights, values, kvStride, count, headDim);
    h += pair ? 2 : 1;
  }
}
