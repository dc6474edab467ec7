// Q4_0 prefill in the relaxed-SIMD build (decode: dot.ts, interleave.ts): the tile
// of tile.ts, four weight rows by two activation rows, with the rows decoded
// to unsigned nibbles (0..15, the 7-bit operand of
// `i16x8.relaxed_dot_i8x16_i7x16_s`) instead of int16, and the activations
// narrowed to int8 as they are read: sixteen multiplies per instruction
// instead of eight. The -8 offset is applied through the activations' quant
// sums (xb), per block and lane, so the result is exactly the baseline's.
//
// Scratch layout (inside tileScratchBytes, which sizes for int16 rows):
//   q8: [4][blocks * 32] u8 nibbles in element order; scales4 as in tile.ts.

import { halfToFloat } from "./half";
import { sumLanes4 } from "./tile";

/**
 * Writes a plain Q4_0 row's nibbles, q8: [blocks * 32] u8 (element order), and
 * scales: [blocks] f32 (an interleaved row: interleave.ts's decodeGroupRowQ4_0).
 */
export function decodeQ4_0Nibbles(w: usize, blocks: i32, q8: usize, scales: usize): void {
  const mask = i8x16.splat(0x0f);
  for (let i = 0; i < blocks; i++) {
    const packed = v128.load(w, 2);
    v128.store(q8, v128.and(packed, mask), 0); // elements 0..15
    v128.store(q8, v128.and(i16x8.shr_u(packed, 4), mask), 16); // elements 16..31
    store<f32>(scales, halfToFloat(load<u16>(w)));
    w += 18;
    q8 += 32;
    scales += 4;
  }
}

/** A decoded row's block at p (32 nibbles) · int8 activations x01 (elements 0..15) and x23 (16..31), in four i32 lanes. */
function blockDot(p: usize, x01: v128, x23: v128): v128 {
  // Pairwise products summed in int16 lanes: at most 4 * 127 * 15, far from overflow.
  const pairs = i16x8.add(i16x8.relaxed_dot_i8x16_i7x16_s(x01, v128.load(p, 0)), i16x8.relaxed_dot_i8x16_i7x16_s(x23, v128.load(p, 16)));
  return i32x4.extadd_pairwise_i16x8_s(pairs);
}

/**
 * Four decoded nibble rows (q8, scales4 [blocks][4]) · two activation rows
 * (int16 xq, scales xd and quant sums xb each): f32x4 at outA and outB, lane k = row k.
 */
export function dotNibbles4x2(
  q8: usize,
  scales4: usize,
  xqA: usize,
  xdA: usize,
  xbA: usize,
  xqB: usize,
  xdB: usize,
  xbB: usize,
  blocks: i32,
  outA: usize,
  outB: usize,
): void {
  const rowBytes = <usize>blocks * 32;
  let p0 = q8;
  let p1 = q8 + rowBytes;
  let p2 = p1 + rowBytes;
  let p3 = p2 + rowBytes;
  let accA = f32x4.splat(0);
  let accB = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    const a01 = i8x16.narrow_i16x8_s(v128.load(xqA, 0), v128.load(xqA, 16));
    const a23 = i8x16.narrow_i16x8_s(v128.load(xqA, 32), v128.load(xqA, 48));
    const b01 = i8x16.narrow_i16x8_s(v128.load(xqB, 0), v128.load(xqB, 16));
    const b23 = i8x16.narrow_i16x8_s(v128.load(xqB, 32), v128.load(xqB, 48));
    const sumA = sumLanes4(blockDot(p0, a01, a23), blockDot(p1, a01, a23), blockDot(p2, a01, a23), blockDot(p3, a01, a23));
    const sumB = sumLanes4(blockDot(p0, b01, b23), blockDot(p1, b01, b23), blockDot(p2, b01, b23), blockDot(p3, b01, b23));
    const scales = v128.load(scales4);
    // sum (q - 8) * x = q·x - 8 * sum x, exact in f32.
    accA = f32x4.add(accA, f32x4.mul(f32x4.sub(f32x4.convert_i32x4_s(sumA), f32x4.splat(8 * load<f32>(xbA))), f32x4.mul(scales, f32x4.splat(load<f32>(xdA)))));
    accB = f32x4.add(accB, f32x4.mul(f32x4.sub(f32x4.convert_i32x4_s(sumB), f32x4.splat(8 * load<f32>(xbB))), f32x4.mul(scales, f32x4.splat(load<f32>(xdB)))));
    p0 += 32;
    p1 += 32;
    p2 += 32;
    p3 += 32;
    xqA += 64;
    xqB += 64;
    xdA += 4;
    xdB += 4;
    xbA += 4;
    xbB += 4;
    scales4 += 16;
  }
  v128.store(outA, accA);
  v128.store(outB, accB);
}
