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
