// For batches of activations (prefill), each weight row is decoded once into
// a plain form and then dotted with every activation row (tile.ts), instead of
// decoding it again per activation row.
//
// Quantized types decode to int16 weights, one f32 scale per block of 32 and
// one f32 minimum per block of 32 (Q4_K only; zero otherwise):
//   w[e] = scale[e / 32] * q16[e] - min[e / 32]
// Integer sub-block scales (Q4_K's 6-bit, Q6_K's 8-bit) are multiplied into
// the int16 values: |q * sc| <= 15 * 63 (Q4_K) and 32 * 128 (Q6_K), so the
// products with activations (|x| <= 127) and their pairwise sums stay exact in int32.
// F16 and BF16 decode to f32.

import { BITS_4_5, fifthBitsK, kConstant, LOW_NIBBLES, LOW_TWO_BITS, q6Quarter, SIXTEEN, THIRTY_TWO } from "./kquants";
import { halfToFloat, halvesToFloats } from "./half";

/**
 * Writes q16: [blocks * 32] i16, scales and mins: [blocks] f32 from a Q8_0 row
 * whose block i has its scale at scale + i * stride and its 32 quants at
 * quants + i * stride (plain Q8_0: row, row + 2, 34; a row of an interleaved
 * group, interleave.ts: 136).
 */
export function decodeQ8_0(scale: usize, quants: usize, stride: usize, blocks: i32, q16: usize, scales: usize, mins: usize): void {
  for (let i = 0; i < blocks; i++) {
    widenQuants(quants, q16);
    store<f32>(scales, halfToFloat(load<u16>(scale)));
    store<f32>(mins, 0);
    scale += stride;
    quants += stride;
    q16 += 64;
    scales += 4;
    mins += 4;
  }
}

/** A Q8_0 block's 32 int8 quants at `quants` as 32 int16 at q16. */
export function widenQuants(quants: usize, q16: usize): void {
  const a = v128.load(quants);
  const b = v128.load(quants, 16);
  v128.store(q16, i16x8.extend_low_i8x16_s(a), 0);
  v128.store(q16, i16x8.extend_high_i8x16_s(a), 16);
  v128.store(q16, i16x8.extend_low_i8x16_s(b), 32);
  v128.store(q16, i16x8.extend_high_i8x16_s(b), 48);
}

/** As decodeQ8_0 for a plain Q4_0 row at w (an interleaved one: interleave.ts's decodeGroupRowQ4_0). */
export function decodeQ4_0(w: usize, blocks: i32, q16: usize, scales: usize, mins: usize): void {
  const lowMask = i16x8.splat(0x0f);
  const offset = i16x8.splat(8);
  for (let i = 0; i < blocks; i++) {
    const packed = v128.load(w, 2);
    const first = i16x8.extend_low_i8x16_u(packed);
    const second = i16x8.extend_high_i8x16_u(packed);
    v128.store(q16, i16x8.sub(v128.and(first, lowMask), offset), 0);
    v128.store(q16, i16x8.sub(v128.and(second, lowMask), offset), 16);
    v128.store(q16, i16x8.sub(i16x8.shr_u(first, 4), offset), 32);
    v128.store(q16, i16x8.sub(i16x8.shr_u(second, 4), offset), 48);
    store<f32>(scales, halfToFloat(load<u16>(w)));
    store<f32>(mins, 0);
    w += 18;
    q16 += 64;
    scales += 4;
    mins += 4;
  }
}

/** Q4_K sub-block j's 6-bit scale (low byte) and min (second byte), unpacked from the 12 scale bytes. */
export function scaleAndMin(scales: usize, j: i32): u32 {
  if (j < 4) return (<u32>load<u8>(scales + j) & 63) | ((<u32>load<u8>(scales + j + 4) & 63) << 8);
  const packed = <u32>load<u8>(scales + j + 4);
  const scale = (packed & 0xf) | ((<u32>load<u8>(scales + j - 4) >> 6) << 4);
  const min = (packed >> 4) | ((<u32>load<u8>(scales + j) >> 6) << 4);
  return scale | (min << 8);
}

export function decodeQ4_K(w: usize, superBlocks: i32, q16: usize, scales: usize, mins: usize): void {
  decodeQuantK(false, w, superBlocks, q16, scales, mins);
}

/** As decodeQ4_K for a Q5_K row (q = nibble | fifth bit << 4, 0..31; q * sc at most 31 * 63: int16). */
export function decodeQ5_K(w: usize, superBlocks: i32, q16: usize, scales: usize, mins: usize): void {
  decodeQuantK(true, w, superBlocks, q16, scales, mins);
}

function decodeQuantK(five: bool, w: usize, superBlocks: i32, q16: usize, scales: usize, mins: usize): void {
  const nibbleMask = kConstant(LOW_NIBBLES);
  const sixteen = kConstant(SIXTEEN);
  for (let i = 0; i < superBlocks; i++) {
    const d = halfToFloat(load<u16>(w));
    const dmin = halfToFloat(load<u16>(w, 2));
    let qs = w + (five ? 48 : 16);
    for (let j = 0; j < 8; j += 2) {
      const first = scaleAndMin(w + 4, j);
      const second = scaleAndMin(w + 4, j + 1);
      const lowScale = i16x8.splat(<i16>(first & 0xff));
      const highScale = i16x8.splat(<i16>(second & 0xff));
      // Q5_K: the fifth bits of sub-blocks j and j + 1 are bits j and j + 1 of qh's bytes.
      const lowBit = i8x16.splat(<i8>(<i32>1 << j));
      const highBit = i8x16.splat(<i8>(<i32>2 << j));
      for (let half = 0; half < 2; half++) {
        const v = v128.load(qs + 16 * half);
        let low = v128.and(v, nibbleMask);
        let high = v128.and(i16x8.shr_u(v, 4), nibbleMask);
        if (five) {
          const qh = v128.load(w + 16 + 16 * half);
          low = v128.or(low, fifthBitsK(qh, lowBit, sixteen));
          high = v128.or(high, fifthBitsK(qh, highBit, sixteen));
        }
        const at = q16 + 32 * half;
        v128.store(at, i16x8.mul(i16x8.extend_low_i8x16_u(low), lowScale), 0);
        v128.store(at, i16x8.mul(i16x8.extend_high_i8x16_u(low), lowScale), 16);
        v128.store(at, i16x8.mul(i16x8.extend_low_i8x16_u(high), highScale), 64);
        v128.store(at, i16x8.mul(i16x8.extend_high_i8x16_u(high), highScale), 80);
      }
      store<f32>(scales, d);
      store<f32>(scales, d, 4);
      store<f32>(mins, dmin * <f32>(first >> 8));
      store<f32>(mins, dmin * <f32>(second >> 8), 4);
      qs += 32;
      q16 += 128;
      scales += 8;
      mins += 8;
    }
    w += five ? 176 : 144;
  }
}

export function decodeQ6_K(w: usize, superBlocks: i32, q16: usize, scales: usize, mins: usize): void {
  const c0 = kConstant(LOW_NIBBLES);
  const c1 = kConstant(LOW_TWO_BITS);
  const c2 = kConstant(BITS_4_5);
  const c3 = kConstant(THIRTY_TWO);
  for (let i = 0; i < superBlocks; i++) {
    const d = halfToFloat(load<u16>(w, 208));
    for (let half = 0; half < 2; half++) {
      const ql = w + 64 * half;
      const qh = w + 128 + 32 * half;
      const sc = w + 192 + 8 * half;
      const out = q16 + 256 * half;
      for (let g = 0; g < 2; g++) {
        const a = v128.load(ql + 16 * g);
        const b = v128.load(ql + 32 + 16 * g);
        const h = v128.load(qh + 16 * g);
        storeScaled(out + 32 * g, q6Quarter(a, b, h, 0, c0, c1, c2, c3), load<i8>(sc + g));
        storeScaled(out + 64 + 32 * g, q6Quarter(a, b, h, 1, c0, c1, c2, c3), load<i8>(sc + g + 2));
        storeScaled(out + 128 + 32 * g, q6Quarter(a, b, h, 2, c0, c1, c2, c3), load<i8>(sc + g + 4));
        storeScaled(out + 192 + 32 * g, q6Quarter(a, b, h, 3, c0, c1, c2, c3), load<i8>(sc + g + 6));
      }
    }
    for (let k = 0; k < 8; k++) {
      store<f32>(scales + 4 * k, d);
      store<f32>(mins + 4 * k, 0);
    }
    w += 210;
    q16 += 512;
    scales += 32;
    mins += 32;
  }
}

/** Sixteen int8 values times `scale`, stored as int16 at `at`. */
function storeScaled(at: usize, values: v128, scale: i8): void {
  const s = i16x8.splat(<i16>scale);
  v128.store(at, i16x8.mul(i16x8.extend_low_i8x16_s(values), s), 0);
  v128.store(at, i16x8.mul(i16x8.extend_high_i8x16_s(values), s), 16);
}

/** Eight halves (F16, bfloat = false; BF16, bfloat = true) at a time to f32; cols a multiple of 8 for the SIMD part. */
export function decodeHalves(w: usize, cols: i32, out: usize, bfloat: bool): void {
  let c = 0;
  for (; c + 4 <= cols; c += 4) {
    const bits = v128.load64_zero(w);
    const wide = i32x4.extend_low_i16x8_u(bits);
    v128.store(out, bfloat ? i32x4.shl(wide, 16) : halvesToFloats(wide));
    w += 8;
    out += 16;
  }
  for (; c < cols; c++) {
    const bits = <u32>load<u16>(w);
    store<f32>(out, bfloat ? reinterpret<f32>(bits << 16) : halfToFloat(bits));
    w += 2;
    out += 4;
  }
}
