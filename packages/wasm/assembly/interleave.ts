// Q4_0 and Q8_0 matrices re-laid out at load for decode (one activation row):
// rows in groups of four, their blocks interleaved, so one pass over a single
// stream of memory reads four rows at a time. Each activation vector is loaded
// once for four rows and the per-block float work (int-to-float, the scales,
// Q4_0's -8 offset) runs once per four rows on a vector whose lane k is row k's.
// (Four rows read from four places at once measured 0.72 x one row at a time
// when the weights stream from memory; interleaved, the same arithmetic
// measured 1.4 x for Q4_0 and 1.1-1.3 x for Q8_0.)
//
// Layouts Q4_0_X4 and Q8_0_X4 (the same bytes as Q4_0 / Q8_0, only moved), for
// rows R, B = cols / 32 blocks, and P = 16 (Q4_0's nibbles) or 32 (Q8_0's quants)
// payload bytes per block:
//   groups:   floor(R / 4) groups of four rows, (8 + 4P) * B bytes each; per block b:
//               f16 d[4]       row k's scale at 2k                     8 bytes
//               u8 q[4][P]     row k's payload, as stored, at 8 + kP   4P bytes
//   tail:     the last R % 4 rows in the plain type, after the groups
// A row's block b in a group: scale at group + (8 + 4P)b + 2k, payload at group + (8 + 4P)b + 8 + kP.

import { halvesToFloats } from "./half";
import { sumLanes4 } from "./tile";

/** Bytes of one block of a group: four scales, four payloads. */
export function groupBlockBytes(payload: usize): usize {
  return 8 + 4 * payload;
}

/**
 * Rewrites a Q4_0 (payload 16) or Q8_0 (payload 32) matrix [rows, cols] at w
 * into its interleaved layout, in place. scratch: 4 * (2 + payload) * (cols / 32)
 * bytes, a copy of the group being rewritten.
 */
export function interleaveRows(w: usize, rows: i32, cols: i32, payload: usize, scratch: usize): void {
  const blocks = cols / 32;
  const blockBytes = 2 + payload;
  const rowBytes = <usize>blocks * blockBytes;
  const groupBlock = groupBlockBytes(payload);
  for (let r = 0; r + 4 <= rows; r += 4) {
    const group = w + <usize>r * rowBytes;
    memory.copy(scratch, group, 4 * rowBytes);
    for (let b = 0; b < blocks; b++) {
      const out = group + <usize>b * groupBlock;
      for (let k = 0; k < 4; k++) {
        const block = scratch + <usize>k * rowBytes + <usize>b * blockBytes;
        store<u16>(out + 2 * k, load<u16>(block));
        // 16 or 32 bytes: vector moves (a memory.copy per block costs several times more at load).
        const to = out + 8 + <usize>k * payload;
        v128.store(to, v128.load(block, 2));
        if (payload == 32) v128.store(to, v128.load(block, 18), 16);
      }
    }
  }
}

/** A row's 32 nibbles at p (the -8 not applied) times the int16 activations x0..x3 (elements 0-7, 8-15, 16-23, 24-31), in four i32 lanes. */
function nibbleDot(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    // As dot.ts's blockQ4_0: unsigned nibbles against int8 activations, summed into the
    // int16 path's lanes, so both builds give the same bits.
    const mask = i8x16.splat(0x0f);
    const packed = v128.load(p);
    const low = i16x8.relaxed_dot_i8x16_i7x16_s(i8x16.narrow_i16x8_s(x0, x1), v128.and(packed, mask));
    const high = i16x8.relaxed_dot_i8x16_i7x16_s(i8x16.narrow_i16x8_s(x2, x3), v128.and(i16x8.shr_u(packed, 4), mask));
    const pairs = i16x8.add(low, high);
    return i32x4.add(i32x4.extend_low_i16x8_s(pairs), i32x4.extend_high_i16x8_s(pairs));
  }
  const lowMask = i16x8.splat(0x0f);
  const packed = v128.load(p);
  const first = i16x8.extend_low_i8x16_u(packed); // bytes 0..7: elements 0..7 (low nibbles) and 16..23 (high)
  const second = i16x8.extend_high_i8x16_u(packed); // bytes 8..15: elements 8..15 and 24..31
  const sum = i32x4.add(i32x4.dot_i16x8_s(v128.and(first, lowMask), x0), i32x4.dot_i16x8_s(v128.and(second, lowMask), x1));
  return i32x4.add(sum, i32x4.add(i32x4.dot_i16x8_s(i16x8.shr_u(first, 4), x2), i32x4.dot_i16x8_s(i16x8.shr_u(second, 4), x3)));
}

/** A row's 32 int8 quants at p times the int16 activations x0..x3, in four i32 lanes. */
function quantDot(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  const low = v128.load(p);
  const high = v128.load(p, 16);
  const sum = i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(low), x0), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(low), x1));
  return i32x4.add(sum, i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(high), x2), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(high), x3)));
}

/** The f16 scales of a group's block at g, times the activation block's scale. */
function groupScales(g: usize, xd: usize): v128 {
  return f32x4.mul(halvesToFloats(i32x4.extend_low_i16x8_u(v128.load64_zero(g))), f32x4.splat(load<f32>(xd)));
}

/**
 * Lane k = row k of the Q4_0_X4 group at g · the activations: xq int16
 * [blocks * 32], xd the blocks' scales, xb their quant sums (for the -8 offset; see quantize.ts).
 */
export function dotQ4_0Group(g: usize, xq: usize, xd: usize, xb: usize, blocks: i32): v128 {
  let acc = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    const x0 = v128.load(xq, 0);
    const x1 = v128.load(xq, 16);
    const x2 = v128.load(xq, 32);
    const x3 = v128.load(xq, 48);
    const isum = sumLanes4(nibbleDot(g + 8, x0, x1, x2, x3), nibbleDot(g + 24, x0, x1, x2, x3), nibbleDot(g + 40, x0, x1, x2, x3), nibbleDot(g + 56, x0, x1, x2, x3));
    // sum (q - 8) * x = q·x - 8 * sum x, exact in f32 (|q·x| < 2^24).
    acc = f32x4.add(acc, f32x4.mul(f32x4.sub(f32x4.convert_i32x4_s(isum), f32x4.splat(8 * load<f32>(xb))), groupScales(g, xd)));
    g += 72;
    xq += 64;
    xd += 4;
    xb += 4;
  }
  return acc;
}

/** As dotQ4_0Group for a Q8_0_X4 group. */
export function dotQ8_0Group(g: usize, xq: usize, xd: usize, blocks: i32): v128 {
  let acc = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    const x0 = v128.load(xq, 0);
    const x1 = v128.load(xq, 16);
    const x2 = v128.load(xq, 32);
    const x3 = v128.load(xq, 48);
    const isum = sumLanes4(quantDot(g + 8, x0, x1, x2, x3), quantDot(g + 40, x0, x1, x2, x3), quantDot(g + 72, x0, x1, x2, x3), quantDot(g + 104, x0, x1, x2, x3));
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(isum), groupScales(g, xd)));
    g += 136;
    xq += 64;
    xd += 4;
  }
  return acc;
}
