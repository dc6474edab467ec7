// Activations quantized on the fly to blocks of 32 int8-range values with one
// float scale (ggml's Q8_0 rounding, kept as separate arrays), so matmul against
// quantized weights runs as integer dot products. The values are stored widened
// to int16, ready for `i32x4.dot_i16x8_s`: every weight row reads them, so
// widening once here saves it in each row's dot product.
// Each block also records the float sum of its 32 inputs, which weight types
// with a per-block minimum (Q4_K) need: sum_i (d*q_i - m) * x_i = d * (q·x) - m * sum_i x_i,
// and the sum of its 32 quantized values, for types with a fixed offset (Q4_0:
// sum_i (q_i - 8) * xq_i = q·xq - 8 * sum_i xq_i).
// For a batch the prefill tile's eight-token pass reads (tile.ts), the quants and
// scales are also written interleaved four tokens to a vector (interleaveTokens),
// once per call instead of once per weight row tile.

import { EIGHT_TOKEN_PASS_FROM, transposeRows4 } from "./tile";

export const Q8_BLOCK = 32;

/** Tokens interleaveTokens writes for count tokens: none below the eight-token pass's batches, else count rounded up to four. */
function interleavedTokens(count: i32): i32 {
  return count >= EIGHT_TOKEN_PASS_FROM ? (count + 3) & ~3 : 0;
}

/** Bytes quantizeActivations writes at xq: count rows of int16 quants, then their interleaved copy. */
export function activationQuantBytes(count: i32, cols: i32): i32 {
  return (count + interleavedTokens(count)) * cols * 2;
}

/** Bytes quantizeActivations writes at xd: count rows of block scales, then their interleaved copy. */
export function activationScaleBytes(count: i32, cols: i32): i32 {
  return (count + interleavedTokens(count)) * (cols / Q8_BLOCK) * 4;
}

/**
 * x: [count, cols] f32. Writes xq: [count, cols] i16 (values -127..127),
 * xd: [count, cols / 32] f32 scales, xs: [count, cols / 32] f32 sums of x and
 * xb: [count, cols / 32] f32 sums of xq; xs or xb 0: not wanted (the matrices
 * of the call do not read them), so not computed. cols is a multiple of 32.
 * From EIGHT_TOKEN_PASS_FROM tokens, xq and xd continue with interleaveTokens' copies: xq
 * holds activationQuantBytes(count, cols) bytes, xd activationScaleBytes(count, cols).
 */
export function quantizeActivations(x: usize, count: i32, cols: i32, xq: usize, xd: usize, xs: usize, xb: usize): void {
  quantizeRows(x, count, cols, xq, xd, xs, xb);
  if (interleavedTokens(count) > 0) interleaveTokens(xq, xd, count, cols, xq + <usize>count * <usize>cols * 2, xd + <usize>count * <usize>(cols / Q8_BLOCK) * 4);
}

/**
 * The quants and scales of `count` tokens regrouped four tokens at a time for the prefill
 * tile: xq4 [ceil(count / 4)][cols / 2][4] i32, lane j = token 4g + j's element pair (two
 * int16), and xd4 [ceil(count / 4)][cols / 32][4] f32; lanes past the last token are zero.
 */
function interleaveTokens(xq: usize, xd: usize, count: i32, cols: i32, xq4: usize, xd4: usize): void {
  const rowBytes = <usize>cols * 2;
  const blocks = cols / Q8_BLOCK;
  const scaleRow = <usize>blocks * 4;
  const zero = i32x4.splat(0);
  for (let t = 0; t < count; t += 4) {
    const first = xq + <usize>t * rowBytes;
    const left = count - t;
    // Four pairs of each of four tokens per pass: a 4 x 4 transpose of int32 lanes.
    for (let i: usize = 0; i < rowBytes; i += 16) {
      const a = v128.load(first + i);
      const b = left > 1 ? v128.load(first + rowBytes + i) : zero;
      const c = left > 2 ? v128.load(first + 2 * rowBytes + i) : zero;
      const d = left > 3 ? v128.load(first + 3 * rowBytes + i) : zero;
      transposeRows4(a, b, c, d, xq4);
      xq4 += 64;
    }
    const scales = xd + <usize>t * scaleRow;
    for (let i = 0; i < blocks; i++) {
      const at = scales + (<usize>i << 2);
      store<f32>(xd4, load<f32>(at));
      store<f32>(xd4, left > 1 ? load<f32>(at + scaleRow) : 0, 4);
      store<f32>(xd4, left > 2 ? load<f32>(at + 2 * scaleRow) : 0, 8);
      store<f32>(xd4, left > 3 ? load<f32>(at + 3 * scaleRow) : 0, 12);
      xd4 += 16;
    }
  }
}

/**
 * The loop's vector constants as data, loaded once before it: V8 rebuilds a vector
 * constant written inline at each use (three instructions each, inside the loop).
 * 0: a float's magnitude bits; 1: 1.5 * 2^23 (roundToInt's), as float bits.
 */
const QUANTIZE_CONSTANTS = memory.data<u32>([0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, 0x4b400000, 0x4b400000, 0x4b400000, 0x4b400000]);

function quantizeRows(x: usize, count: i32, cols: i32, xq: usize, xd: usize, xs: usize, xb: usize): void {
  const blocks = (count * cols) / Q8_BLOCK;
  const magnitude = v128.load(QUANTIZE_CONSTANTS);
  const magic = v128.load(QUANTIZE_CONSTANTS, 16);
  for (let b = 0; b < blocks; b++) {
    const v0 = v128.load(x, 0);
    const v1 = v128.load(x, 16);
    const v2 = v128.load(x, 32);
    const v3 = v128.load(x, 48);
    const v4 = v128.load(x, 64);
    const v5 = v128.load(x, 80);
    const v6 = v128.load(x, 96);
    const v7 = v128.load(x, 112);
    // The largest magnitude as the largest of the magnitudes' bits, as int32: for floats of one
    // sign the same order (an infinity above every finite value, a NaN above both, as
    // f32x4.max would give it), in one instruction where V8 gives f32x4.max eight.
    let amax = i32x4.max_s(
      i32x4.max_s(i32x4.max_s(v128.and(v0, magnitude), v128.and(v1, magnitude)), i32x4.max_s(v128.and(v2, magnitude), v128.and(v3, magnitude))),
      i32x4.max_s(i32x4.max_s(v128.and(v4, magnitude), v128.and(v5, magnitude)), i32x4.max_s(v128.and(v6, magnitude), v128.and(v7, magnitude))),
    );
    amax = i32x4.max_s(amax, i32x4.shuffle(amax, amax, 2, 3, 0, 1));
    amax = i32x4.max_s(amax, i32x4.shuffle(amax, amax, 1, 0, 3, 2));
    const maxAbs = f32x4.extract_lane(amax, 0);
    const inverse = f32x4.splat(maxAbs > 0 ? 127 / maxAbs : 0);
    store<f32>(xd, maxAbs / 127);
    const q0 = roundToInt(v0, inverse, magic);
    const q1 = roundToInt(v1, inverse, magic);
    const q2 = roundToInt(v2, inverse, magic);
    const q3 = roundToInt(v3, inverse, magic);
    const q4 = roundToInt(v4, inverse, magic);
    const q5 = roundToInt(v5, inverse, magic);
    const q6 = roundToInt(v6, inverse, magic);
    const q7 = roundToInt(v7, inverse, magic);
    v128.store(xq, i16x8.narrow_i32x4_s(q0, q1), 0);
    v128.store(xq, i16x8.narrow_i32x4_s(q2, q3), 16);
    v128.store(xq, i16x8.narrow_i32x4_s(q4, q5), 32);
    v128.store(xq, i16x8.narrow_i32x4_s(q6, q7), 48);
    if (xb != 0) {
      let quantSum = i32x4.add(i32x4.add(i32x4.add(q0, q1), i32x4.add(q2, q3)), i32x4.add(i32x4.add(q4, q5), i32x4.add(q6, q7)));
      quantSum = i32x4.add(quantSum, i32x4.shuffle(quantSum, quantSum, 2, 3, 0, 1));
      quantSum = i32x4.add(quantSum, i32x4.shuffle(quantSum, quantSum, 1, 0, 3, 2));
      store<f32>(xb, <f32>i32x4.extract_lane(quantSum, 0));
      xb += 4;
    }
    if (xs != 0) {
      let sum = f32x4.add(f32x4.add(f32x4.add(v0, v1), f32x4.add(v2, v3)), f32x4.add(f32x4.add(v4, v5), f32x4.add(v6, v7)));
      sum = f32x4.add(sum, i32x4.shuffle(sum, sum, 2, 3, 0, 1));
      sum = f32x4.add(sum, i32x4.shuffle(sum, sum, 1, 0, 3, 2));
      store<f32>(xs, f32x4.extract_lane(sum, 0));
      xs += 4;
    }
    x += 128;
    xq += 64;
    xd += 4;
  }
}

/**
 * Rounds to nearest (ties to even); |v * inverse| <= 127, so the int16 narrowing never saturates.
 * Adding 1.5 * 2^23 (magic) to a float of magnitude below 2^22 rounds it to an integer held in the
 * low mantissa bits, so subtracting the constant's bits gives the int32: two instructions where
 * f32x4.nearest and i32x4.trunc_sat_f32x4_s take several, in the quantization's innermost loop.
 */
function roundToInt(v: v128, inverse: v128, magic: v128): v128 {
  return i32x4.sub(f32x4.add(f32x4.mul(v, inverse), magic), magic);
}
