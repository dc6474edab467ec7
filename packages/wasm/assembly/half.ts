// IEEE binary16 to float32.
// WebAssembly SIMD128 has no half-precision type, so the bits are rebuilt:
// a half's exponent and mantissa shifted into float32 position and scaled by
// 2^112 (the exponent bias difference) is exact for normal and subnormal halves;
// infinities and NaNs (exponent 31) are patched separately.

export const HALF_TO_FLOAT_SCALE: f32 = 5.192296858534828e33; // 2^112

export function halfToFloat(bits: u32): f32 {
  const magnitude = (bits & 0x7fff) << 13;
  const scaled = reinterpret<u32>(reinterpret<f32>(magnitude) * HALF_TO_FLOAT_SCALE);
  // select, not if: a data-dependent branch in every block's scale costs more than both sides.
  const value = select<u32>(magnitude | 0x7f800000, scaled, magnitude >= 0x0f800000);
  return reinterpret<f32>(value | ((bits & 0x8000) << 16));
}

/** Four halves, zero-extended into i32 lanes, as four floats (inf / NaN kept): halfToFloat lane-wise, in shifts rather than masks (fewer vector constants to keep in registers). */
export function halvesToFloats(bits: v128): v128 {
  const magnitude = i32x4.shr_u(i32x4.shl(bits, 17), 4); // exponent and mantissa in float32 position
  const scaled = f32x4.mul(magnitude, f32x4.splat(HALF_TO_FLOAT_SCALE));
  const special = v128.and(i32x4.gt_s(magnitude, i32x4.splat(0x0f7fffff)), i32x4.splat(0x7f800000)); // exponent 31
  return v128.or(v128.or(scaled, special), i32x4.shl(i32x4.shr_u(bits, 15), 31));
}

/**
 * The 16-bit values of `bits`' lanes 0..3 (high = false) or 4..7 (high = true)
 * moved into the upper half of four 32-bit lanes, the lower half zero:
 * bfloat16 to float32 in one shuffle (V8 emits a single unpack).
 */
export function upperHalves(bits: v128, high: bool): v128 {
  const zero = i32x4.splat(0);
  return high
    ? i8x16.shuffle(zero, bits, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31)
    : i8x16.shuffle(zero, bits, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
}

/**
 * Four finite halves, each in the upper 16 bits of a 32-bit lane, as float32:
 * shifted right by 3 (arithmetic) the exponent and mantissa land in float32
 * position and the sign stays in bit 31, copied into bits 28-30, which the mask
 * clears; that float is the half times 2^-112 (subnormals included), and
 * scaling by 2^112 is exact.
 */
export function finiteHalves(upper: v128): v128 {
  return f32x4.mul(v128.and(i32x4.shr_s(upper, 3), i32x4.splat(0x8fffffff)), f32x4.splat(HALF_TO_FLOAT_SCALE));
}
