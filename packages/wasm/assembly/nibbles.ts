// Q4_0 prefill in the relaxed-SIMD build (decode: dot.ts, interleave.ts): the
// packed tile of tile.ts, four weight rows by four activation rows, with the
// rows decoded to unsigned nibbles (0..15, the 7-bit operand of
// `i16x8.relaxed_dot_i8x16_i7x16_s`) instead of int16, and the activations
// narrowed to int8 as they are read: sixteen multiplies per instruction
// instead of eight. The -8 offset is applied through the activations' quant
// sums (xb), per block and lane, so the result is exactly the baseline's.
//
// Scratch (inside tileScratchBytes, which sizes for int16 rows): the rows as
// q8 [4][blocks * 32] u8 nibbles in element order, then packed per block as
// { scales f32[4], row 0..3 nibbles u8[32] each } (packNibbleTile).

import { halfToFloat } from "./half";
import { sumLanes4, TILE_ROWS } from "./tile";

/** Bytes of one block of a packed nibble tile: four scales, four rows of 32 nibbles (tile.ts's dotPackedTile<u8> steps by the same). */
const NIBBLE_BLOCK_BYTES: usize = 16 + 4 * 32;

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

/**
 * Four decoded nibble rows (q8 [4][blocks * 32], their scales [4][blocks] f32)
 * packed per block as tile.ts's packTile packs int16 rows.
 */
export function packNibbleTile(q8: usize, scales: usize, blocks: i32, packed: usize): void {
  const rowBytes = <usize>blocks * 32;
  const rowScales = <usize>blocks * 4;
  for (let i = 0; i < blocks; i++) {
    for (let k = 0; k < TILE_ROWS; k++) {
      store<f32>(packed + (<usize>k << 2), load<f32>(scales + <usize>k * rowScales));
      const from = q8 + <usize>k * rowBytes;
      v128.store(packed + 16 + <usize>k * 32, v128.load(from), 0);
      v128.store(packed + 16 + <usize>k * 32, v128.load(from, 16), 16);
    }
    packed += NIBBLE_BLOCK_BYTES;
    q8 += 32;
    scales += 4;
  }
}

/**
 * The packed nibble tile's per-block steps, static so that they can be marked
 * @inline (eslint's parser accepts decorators on class members only).
 */
export class NibbleBlock {
  /** A row's 32 nibbles at p · int8 activations x01 (elements 0..15) and x23 (16..31), in four i32 lanes. */
  @inline static rowDot(p: usize, x01: v128, x23: v128): v128 {
    // Pairwise products summed in int16 lanes: at most 4 * 127 * 15, far from overflow.
    const pairs = i16x8.add(i16x8.relaxed_dot_i8x16_i7x16_s(x01, v128.load(p, 0)), i16x8.relaxed_dot_i8x16_i7x16_s(x23, v128.load(p, 16)));
    return i32x4.extadd_pairwise_i16x8_s(pairs);
  }

  /**
   * One packed block at p · one activation block (32 int16 at x, block scale xd,
   * quant sum xb) added to acc: lane k += (q·x - 8 sum x) * scale[k] * xd, exact
   * in f32 before the scaling, as the baseline's int16 tile computes it.
   */
  @inline static accumulate(acc: v128, p: usize, x: usize, xd: f32, xb: f32): v128 {
    const x01 = i8x16.narrow_i16x8_s(v128.load(x, 0), v128.load(x, 16));
    const x23 = i8x16.narrow_i16x8_s(v128.load(x, 32), v128.load(x, 48));
    const sums = sumLanes4(NibbleBlock.rowDot(p + 16, x01, x23), NibbleBlock.rowDot(p + 48, x01, x23), NibbleBlock.rowDot(p + 80, x01, x23), NibbleBlock.rowDot(p + 112, x01, x23));
    const offsetSums = f32x4.sub(f32x4.convert_i32x4_s(sums), f32x4.splat(8 * xb));
    return f32x4.add(acc, f32x4.mul(offsetSums, f32x4.mul(v128.load(p), f32x4.splat(xd))));
  }
}
