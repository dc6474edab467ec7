// Q4_1, Q5_0 and Q5_1, ggml's older 32-element block types. K-quant files keep
// them for matrices whose rows are not whole 256-element super-blocks: a
// Q4_K_M file of a model with hidden size 576 (SmolLM2-135M) or 896
// (Qwen2.5-0.5B) stores most of its matrices as Q5_0 (Q5_K_M: Q5_1).
//
// Block layouts (ggml's):
//   Q4_1 (20 bytes / 32): f16 d, f16 m, u8 qs[16]               w = d * q + m
//   Q5_0 (22 bytes / 32): f16 d, u32 qh, u8 qs[16]              w = d * (q - 16)
//   Q5_1 (24 bytes / 32): f16 d, f16 m, u32 qh, u8 qs[16]       w = d * q + m
// qs byte j holds element j in its low nibble and element 16 + j in its high
// one; bit j of qh is the fifth bit of element j.
//
// Decode (one activation row): the 32 values of a block are built in int8 lanes
// (the fifth bits spread over bytes with one swizzle, a mask and a compare),
// widened and multiplied with the int16 activations of quantize.ts: an exact
// integer sum per block, scaled by d times the activation block's scale. The
// minimum m (Q4_1, Q5_1) meets the block's quantized activations too, as their
// scale times their quant sum (xd * xb), the way llama.cpp's Q8_1 activations
// carry it; with the float sums instead (Q4_K's way), a random Gemma-3 Q4_1
// model's logits were 0.9984 cosine-close to llama.cpp's, below the 0.999 the
// cross-check asks. Prefill: rows decoded to int16 for tile.ts (decodeLegacy),
// m as a minimum (minimumsTerm4 of the same xd * xb).

import { dot8, horizontalSum } from "./dot";
import { halfToFloat } from "./half";

// ggml type ids (GgmlType in src/kernels/types.ts).
export const Q4_1 = 3;
export const Q5_0 = 6;
export const Q5_1 = 7;

/** Bytes of one block of `type`. */
export function legacyBlockBytes(type: i32): usize {
  return type == Q4_1 ? 20 : type == Q5_0 ? 22 : 24;
}

/**
 * Vector constants: 0x0f in every byte; each byte's bit within its qh byte
 * (1, 2, 4, .. 128, twice); 0x10 in every byte; and the swizzles that give byte
 * j of the low (high) half qh's byte j / 8 (2 + j / 8). As data loaded once per
 * call: V8 rebuilds an inline shuffle's selector bytes at every use.
 */
const LEGACY_CONSTANTS = memory.data<u8>([
  0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f,
  1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
  0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
  0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
]);

/**
 * A block's steps, as static members so that they can be marked @inline (eslint's
 * parser accepts decorators on class members only): inlined with a constant
 * `type`, each exported function below keeps only its type's branches.
 * c0..c4: LEGACY_CONSTANTS' five vectors, loaded once per call.
 */
class LegacyBlock {
  /** 0x10 in byte j where bit j of the 16 qh bits `spread` (c3 or c4) picks is set, else 0. */
  @inline static fifthBits(qh: v128, spread: v128, c1: v128, c2: v128): v128 {
    const bytes = i8x16.swizzle(qh, spread);
    return v128.and(i8x16.eq(v128.and(bytes, c1), c1), c2);
  }

  /** The block at w's values q as int8: elements 0..15 (high = false) or 16..31. Q5_0's come as q - 16. */
  @inline static values(type: i32, w: usize, high: bool, c0: v128, c1: v128, c2: v128, c3: v128, c4: v128): v128 {
    const packed = v128.load(w + (type == Q4_1 ? 4 : type == Q5_0 ? 6 : 8));
    let q = high ? v128.and(i16x8.shr_u(packed, 4), c0) : v128.and(packed, c0);
    if (type != Q4_1) q = v128.or(q, LegacyBlock.fifthBits(v128.load32_zero(w + (type == Q5_0 ? 2 : 4)), high ? c4 : c3, c1, c2));
    if (type == Q5_0) q = i8x16.sub(q, c2); // - 16
    return q;
  }

  /** Sixteen int8 values times the sixteen int16 activations at x: four i32 lanes. */
  @inline static dot16(q: v128, x: usize): v128 {
    return i32x4.add(dot8(i16x8.extend_low_i8x16_s(q), x, 0), dot8(i16x8.extend_high_i8x16_s(q), x, 16));
  }

  /** A row · activations (dotLegacy's arguments). */
  @inline static dot(type: i32, w: usize, xq: usize, xd: usize, xb: usize, blocks: i32): f32 {
    const c0 = v128.load(LEGACY_CONSTANTS);
    const c1 = v128.load(LEGACY_CONSTANTS, 16);
    const c2 = v128.load(LEGACY_CONSTANTS, 32);
    const c3 = v128.load(LEGACY_CONSTANTS, 48);
    const c4 = v128.load(LEGACY_CONSTANTS, 64);
    const stride = legacyBlockBytes(type);
    let acc = f32x4.splat(0);
    let minimums: f32 = 0;
    for (let i = 0; i < blocks; i++) {
      // At most 32 * 31 * 127 in magnitude: exact in f32.
      const low = LegacyBlock.dot16(LegacyBlock.values(type, w, false, c0, c1, c2, c3, c4), xq);
      const isum = i32x4.add(low, LegacyBlock.dot16(LegacyBlock.values(type, w, true, c0, c1, c2, c3, c4), xq + 32));
      const scale = load<f32>(xd);
      acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(isum), f32x4.splat(halfToFloat(load<u16>(w)) * scale)));
      if (type != Q5_0) minimums += halfToFloat(load<u16>(w, 2)) * (scale * load<f32>(xb));
      w += stride;
      xq += 64;
      xd += 4;
      xb += 4;
    }
    return horizontalSum(acc) + minimums;
  }

  /** A row decoded for tile.ts (decodeLegacy's arguments). */
  @inline static decode(type: i32, w: usize, blocks: i32, q16: usize, scales: usize, mins: usize): void {
    const c0 = v128.load(LEGACY_CONSTANTS);
    const c1 = v128.load(LEGACY_CONSTANTS, 16);
    const c2 = v128.load(LEGACY_CONSTANTS, 32);
    const c3 = v128.load(LEGACY_CONSTANTS, 48);
    const c4 = v128.load(LEGACY_CONSTANTS, 64);
    const stride = legacyBlockBytes(type);
    for (let i = 0; i < blocks; i++) {
      const low = LegacyBlock.values(type, w, false, c0, c1, c2, c3, c4);
      const high = LegacyBlock.values(type, w, true, c0, c1, c2, c3, c4);
      v128.store(q16, i16x8.extend_low_i8x16_s(low), 0);
      v128.store(q16, i16x8.extend_high_i8x16_s(low), 16);
      v128.store(q16, i16x8.extend_low_i8x16_s(high), 32);
      v128.store(q16, i16x8.extend_high_i8x16_s(high), 48);
      store<f32>(scales, halfToFloat(load<u16>(w)));
      store<f32>(mins, type == Q5_0 ? 0 : -halfToFloat(load<u16>(w, 2)));
      w += stride;
      q16 += 64;
      scales += 4;
      mins += 4;
    }
  }
}

/**
 * A Q4_1, Q5_0 or Q5_1 row · activations: xq int16 [blocks * 32], xd the blocks'
 * scales and xb their quant sums (for the minimums; Q5_0 reads none), [blocks] f32 each.
 */
export function dotLegacy(type: i32, w: usize, xq: usize, xd: usize, xb: usize, blocks: i32): f32 {
  if (type == Q4_1) return LegacyBlock.dot(Q4_1, w, xq, xd, xb, blocks);
  if (type == Q5_0) return LegacyBlock.dot(Q5_0, w, xq, xd, xb, blocks);
  return LegacyBlock.dot(Q5_1, w, xq, xd, xb, blocks);
}

/**
 * A Q4_1, Q5_0 or Q5_1 row decoded for tile.ts as decode.ts decodes the others:
 * q16 [blocks * 32] int16 (Q5_0: q - 16), scales [blocks] f32 (d) and mins
 * [blocks] f32 (-m; zero for Q5_0): w = scale * q16 - min.
 */
export function decodeLegacy(type: i32, w: usize, blocks: i32, q16: usize, scales: usize, mins: usize): void {
  if (type == Q4_1) LegacyBlock.decode(Q4_1, w, blocks, q16, scales, mins);
  else if (type == Q5_0) LegacyBlock.decode(Q5_0, w, blocks, q16, scales, mins);
  else LegacyBlock.decode(Q5_1, w, blocks, q16, scales, mins);
}
