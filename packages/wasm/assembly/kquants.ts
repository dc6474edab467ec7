// Decode (one activation row) dot products of the K-quant types, Q4_K, Q5_K and
// Q6_K, read in their stored ggml layout (block layouts in dot.ts's header; Q5_K
// is Q4_K with 32 bytes of fifth bits between the scales and the nibbles).
//
// Both sum each sub-block's integer products exactly, then bring four sub-blocks
// together with sumLanes4 (lane k: sub-block k) and apply the integer sub-block
// scales to that one vector: sum q * sc * x, an integer below 2^24 in magnitude,
// so exact in int32 and in its conversion to f32. The float work is then one
// convert, two multiplies (the super-block's d and the activation blocks' scales)
// and an add per four sub-blocks, where the row-at-a-time loops before scaled
// every sub-block's partial sums on their own; a (row, sub-block) term is the
// float the prefill tile computes for it (decode.ts multiplies sc into the quants).
//
// Like interleave.ts's group loops, each sub-block's sums are stored to `sink`
// (this thread's scratch, never read) as they are computed, so that V8 finishes
// one sub-block's products before the next one's loads rather than computing
// every load and unpack of a super-block first and spilling them; and their vector
// constants come from data loaded before the loop (V8 rebuilds inline vector
// constants at every use, three instructions each).

import { dot16, dot8, horizontalSum } from "./dot";
import { halfToFloat } from "./half";
import { sumLanes4 } from "./tile";

/**
 * Vector constants: byte masks 0x0f, 0x03, 0x30, the bytes 32, 0x000f in
 * 16-bit lanes, and the bytes 16 (kConstant's indices in that order).
 */
const K_CONSTANTS = memory.data<u8>([
  0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f,
  0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
  0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
  0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
  0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00, 0x0f, 0x00,
  0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
]);
export const LOW_NIBBLES = 0;
export const LOW_TWO_BITS = 1;
export const BITS_4_5 = 2;
export const THIRTY_TWO = 3;
const LOW_NIBBLES_16 = 4;
export const SIXTEEN = 5;

/** K_CONSTANTS' vector `which` (LOW_NIBBLES, ...). */
export function kConstant(which: i32): v128 {
  return v128.load(K_CONSTANTS + (<usize>which << 4));
}

/** Thirty-two int16 weights w0..w3 (eight each) times the 32 int16 activations at x, in four i32 lanes. */
function dot32(w0: v128, w1: v128, w2: v128, w3: v128, x: usize): v128 {
  return i32x4.add(i32x4.add(dot8(w0, x, 0), dot8(w1, x, 16)), i32x4.add(dot8(w2, x, 32), dot8(w3, x, 48)));
}

/** Four bytes of `bytes` (below 128) as four i32 lanes. */
function bytesToInts(bytes: u32): v128 {
  return i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(i32x4.splat(bytes)));
}

/**
 * 0x10 in each byte of `qh` whose bit `bit` (a byte with just that bit set, in every lane) is
 * set: a Q5_K fifth bit, moved to bit 4. sixteen: kConstant(SIXTEEN).
 */
export function fifthBitsK(qh: v128, bit: v128, sixteen: v128): v128 {
  return v128.and(i8x16.eq(v128.and(qh, bit), bit), sixteen);
}

/** The Q4_K and Q5_K rows' steps, static so that they can be marked @inline and specialized on `five`. */
class QuantKRow {
  /**
   * A Q4_K (five = false) or Q5_K row · activations: xq int16 [superBlocks * 256], xd the
   * blocks' scales and xs their float sums (for the minimums), [superBlocks * 8] f32 each.
   */
  @inline static dot(five: bool, w: usize, xq: usize, xd: usize, xs: usize, superBlocks: i32, sink: usize): f32 {
    let acc = f32x4.splat(0);
    let minAcc = f32x4.splat(0);
    const lowMask = kConstant(LOW_NIBBLES_16);
    const nibbleMask = kConstant(LOW_NIBBLES);
    const sixteen = kConstant(SIXTEEN);
    for (let i = 0; i < superBlocks; i++) {
      // The twelve scale bytes s[0..11] hold eight 6-bit scales and mins:
      // sub-block j < 4: scale s[j] & 63, min s[j + 4] & 63; j >= 4: scale
      // s[j + 4] & 15 | (s[j - 4] >> 6) << 4, min s[j + 4] >> 4 | (s[j] >> 6) << 4.
      // As three little-endian words, all eight of each come out four at a time:
      const a = load<u32>(w, 4);
      const b = load<u32>(w, 8);
      const c = load<u32>(w, 12);
      // Sub-block pair j: 32 bytes, the low nibbles sub-block 2j, the high ones 2j + 1; Q5_K's
      // fifth bits of byte l's two elements are bits 2j and 2j + 1 of qh[l].
      const qs = w + (five ? 48 : 16);
      const qh0 = five ? v128.load(w, 16) : nibbleMask;
      const qh1 = five ? v128.load(w, 32) : nibbleMask;
      const sums = sink;
      for (let j: usize = 0; j < 4; j++) {
        const v0 = v128.load(qs + 32 * j);
        const v1 = v128.load(qs + 32 * j, 16);
        const x = xq + 128 * j;
        if (five) {
          const lowBit = i8x16.splat(<i8>(<i32>1 << (2 * <i32>j)));
          const highBit = i8x16.splat(<i8>(<i32>2 << (2 * <i32>j)));
          const lo0 = v128.or(v128.and(v0, nibbleMask), fifthBitsK(qh0, lowBit, sixteen));
          const lo1 = v128.or(v128.and(v1, nibbleMask), fifthBitsK(qh1, lowBit, sixteen));
          const hi0 = v128.or(v128.and(i16x8.shr_u(v0, 4), nibbleMask), fifthBitsK(qh0, highBit, sixteen));
          const hi1 = v128.or(v128.and(i16x8.shr_u(v1, 4), nibbleMask), fifthBitsK(qh1, highBit, sixteen));
          v128.store(sums + 32 * j, dot32(i16x8.extend_low_i8x16_u(lo0), i16x8.extend_high_i8x16_u(lo0), i16x8.extend_low_i8x16_u(lo1), i16x8.extend_high_i8x16_u(lo1), x));
          v128.store(sums + 32 * j, dot32(i16x8.extend_low_i8x16_u(hi0), i16x8.extend_high_i8x16_u(hi0), i16x8.extend_low_i8x16_u(hi1), i16x8.extend_high_i8x16_u(hi1), x + 64), 16);
        } else {
          const b0 = i16x8.extend_low_i8x16_u(v0);
          const b1 = i16x8.extend_high_i8x16_u(v0);
          const b2 = i16x8.extend_low_i8x16_u(v1);
          const b3 = i16x8.extend_high_i8x16_u(v1);
          v128.store(sums + 32 * j, dot32(v128.and(b0, lowMask), v128.and(b1, lowMask), v128.and(b2, lowMask), v128.and(b3, lowMask), x));
          v128.store(sums + 32 * j, dot32(i16x8.shr_u(b0, 4), i16x8.shr_u(b1, 4), i16x8.shr_u(b2, 4), i16x8.shr_u(b3, 4), x + 64), 16);
        }
      }
      // Lane k: sub-block k's (then 4 + k's) sum of q * x, times its scale (Q5_K: at most
      // 32 * 31 * 127 * 63 < 2^24, exact).
      const low = i32x4.mul(sumLanes4(v128.load(sums), v128.load(sums, 16), v128.load(sums, 32), v128.load(sums, 48)), bytesToInts(a & 0x3f3f3f3f));
      const highScales = bytesToInts((c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030));
      const high = i32x4.mul(sumLanes4(v128.load(sums, 64), v128.load(sums, 80), v128.load(sums, 96), v128.load(sums, 112)), highScales);
      const d = f32x4.splat(halfToFloat(load<u16>(w)));
      acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(low), f32x4.mul(d, v128.load(xd, 0))));
      acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(high), f32x4.mul(d, v128.load(xd, 16))));
      // The minimums meet the activations' float sums: dmin * sum_j m_j * xs_j.
      const minsLow = f32x4.convert_i32x4_s(bytesToInts(b & 0x3f3f3f3f));
      const minsHigh = f32x4.convert_i32x4_s(bytesToInts(((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030)));
      const dmin = f32x4.splat(halfToFloat(load<u16>(w, 2)));
      minAcc = f32x4.add(minAcc, f32x4.mul(dmin, f32x4.add(f32x4.mul(minsLow, v128.load(xs, 0)), f32x4.mul(minsHigh, v128.load(xs, 16)))));
      w += five ? 176 : 144;
      xq += 512;
      xd += 32;
      xs += 32;
    }
    return horizontalSum(acc) - horizontalSum(minAcc);
  }
}

/**
 * Q4_K row · activations: xq int16 [superBlocks * 256], xd the blocks' scales and
 * xs their float sums (for the minimums), [superBlocks * 8] f32 each.
 */
export function dotQ4_K(w: usize, xq: usize, xd: usize, xs: usize, superBlocks: i32, sink: usize): f32 {
  return QuantKRow.dot(false, w, xq, xd, xs, superBlocks, sink);
}

/** As dotQ4_K for a Q5_K row. */
export function dotQ5_K(w: usize, xq: usize, xd: usize, xs: usize, superBlocks: i32, sink: usize): f32 {
  return QuantKRow.dot(true, w, xq, xd, xs, superBlocks, sink);
}

/**
 * Sixteen signed 6-bit Q6_K values (q - 32) of quarter 0..3 of a half block,
 * from 16 bytes each of ql's first (a) and second (b) 32 and of qh (h): the low
 * 4 bits are a nibble of a (quarters 0, 2) or b (1, 3), the high 2 bits bit
 * pair `quarter` of h. Assembled in int8 lanes, ready to widen; c0..c3 are
 * kConstant(LOW_NIBBLES .. THIRTY_TWO). The shifts are 16-bit ones (WebAssembly's
 * 8-bit shifts cost V8 a shift and a mask each): every bit they move across a
 * byte boundary is masked off.
 */
export function q6Quarter(a: v128, b: v128, h: v128, quarter: i32, c0: v128, c1: v128, c2: v128, c3: v128): v128 {
  let q: v128;
  switch (quarter) {
    case 0:
      q = v128.or(v128.and(a, c0), i16x8.shl(v128.and(h, c1), 4));
      break;
    case 1:
      q = v128.or(v128.and(b, c0), v128.and(i16x8.shl(h, 2), c2));
      break;
    case 2:
      q = v128.or(v128.and(i16x8.shr_u(a, 4), c0), v128.and(h, c2));
      break;
    default:
      q = v128.or(v128.and(i16x8.shr_u(b, 4), c0), v128.and(i16x8.shr_u(h, 2), c2));
  }
  return i8x16.sub(q, c3);
}

/** Q6_K row · activations: xq int16 [superBlocks * 256], xd the blocks' scales [superBlocks * 8] f32. */
export function dotQ6_K(w: usize, xq: usize, xd: usize, superBlocks: i32, sink: usize): f32 {
  let acc = f32x4.splat(0);
  const c0 = kConstant(LOW_NIBBLES);
  const c1 = kConstant(LOW_TWO_BITS);
  const c2 = kConstant(BITS_4_5);
  const c3 = kConstant(THIRTY_TWO);
  for (let i = 0; i < superBlocks; i++) {
    const d = f32x4.splat(halfToFloat(load<u16>(w, 208)));
    // Two halves of 128 elements: 64 bytes of ql, 32 of qh and 8 scales each. Quarter k of a
    // half (its elements 32k .. 32k + 31, one activation block) takes scale 2k for its first 16
    // elements (g = 0) and 2k + 1 for the rest (g = 1).
    for (let half: usize = 0; half < 2; half++) {
      const ql = w + 64 * half;
      const qh = w + 128 + 32 * half;
      for (let g: usize = 0; g < 2; g++) {
        const a = v128.load(ql + 16 * g);
        const b = v128.load(ql + 32 + 16 * g);
        const h = v128.load(qh + 16 * g);
        const x = xq + 32 * g;
        const to = sink + 64 * g;
        v128.store(to, dot16(q6Quarter(a, b, h, 0, c0, c1, c2, c3), x, 0));
        v128.store(to, dot16(q6Quarter(a, b, h, 1, c0, c1, c2, c3), x, 64), 16);
        v128.store(to, dot16(q6Quarter(a, b, h, 2, c0, c1, c2, c3), x, 128), 32);
        v128.store(to, dot16(q6Quarter(a, b, h, 3, c0, c1, c2, c3), x, 192), 48);
      }
      // The half's eight int8 scales as [s0, s2, s4, s6] (g = 0) and [s1, s3, s5, s7] (g = 1).
      const scales = v128.load64_zero(w + 192 + 8 * half);
      const evenOdd = i16x8.extend_low_i8x16_s(i8x16.shuffle(scales, scales, 0, 2, 4, 6, 1, 3, 5, 7, 0, 0, 0, 0, 0, 0, 0, 0));
      const first = i32x4.mul(sumLanes4(v128.load(sink), v128.load(sink, 16), v128.load(sink, 32), v128.load(sink, 48)), i32x4.extend_low_i16x8_s(evenOdd));
      const second = i32x4.mul(sumLanes4(v128.load(sink, 64), v128.load(sink, 80), v128.load(sink, 96), v128.load(sink, 112)), i32x4.extend_high_i16x8_s(evenOdd));
      // Lane k: quarter k's sum of (q - 32) * sc * x, at most 32 * 32 * 128 * 127 < 2^24: exact in f32.
      acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(i32x4.add(first, second)), f32x4.mul(d, v128.load(xd))));
      xq += 256;
      xd += 16;
    }
    w += 210;
  }
  return horizontalSum(acc);
}
