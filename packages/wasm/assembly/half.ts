// IEEE binary16 and bfloat16 to float32, scalar and four lanes at a time.
// WebAssembly SIMD128 has no half-precision type, so the bits are rebuilt:
// a half's exponent and mantissa shifted into float32 position and scaled by
// 2^112 (the exponent bias difference) is exact for normal and subnormal halves;
// infinities and NaNs (exponent 31) are patched separately.

const HALF_TO_FLOAT_SCALE: f32 = 5.192296858534828e33; // 2^112

export function halfToFloat(bits: u32): f32 {
  const magnitude = (bits & 0x7fff) << 13;
  let value: f32;
  if ((bits & 0x7c00) == 0x7c00) value = reinterpret<f32>(magnitude | 0x7f800000);
  else value = reinterpret<f32>(magnitude) * HALF_TO_FLOAT_SCALE;
  return reinterpret<f32>(reinterpret<u32>(value) | ((bits & 0x8000) << 16));
}

/** Four halves, zero-extended into the i32 lanes of `bits`, as four floats. */
export function halvesToFloats(bits: v128): v128 {
  const magnitude = i32x4.shl(v128.and(bits, i32x4.splat(0x7fff)), 13);
  const scaled = f32x4.mul(magnitude, f32x4.splat(HALF_TO_FLOAT_SCALE));
  const special = i32x4.eq(v128.and(bits, i32x4.splat(0x7c00)), i32x4.splat(0x7c00));
  const patched = v128.bitselect(v128.or(magnitude, i32x4.splat(0x7f800000)), scaled, special);
  return v128.or(patched, i32x4.shl(v128.and(bits, i32x4.splat(0x8000)), 16));
}

/** Four bfloat16 values, zero-extended into i32 lanes, as four floats (the top halves of float32s). */
export function bfloat16sToFloats(bits: v128): v128 {
  return i32x4.shl(bits, 16);
}
