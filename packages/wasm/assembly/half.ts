// IEEE binary16 to float32.
// WebAssembly SIMD128 has no half-precision type, so the bits are rebuilt:
// a half's exponent and mantissa shifted into float32 position and scaled by
// 2^112 (the exponent bias difference) is exact for normal and subnormal halves;
// infinities and NaNs (exponent 31) are patched separately.

export const HALF_TO_FLOAT_SCALE: f32 = 5.192296858534828e33; // 2^112

export function halfToFloat(bits: u32): f32 {
  const magnitude = (bits & 0x7fff) << 13;
  let value: f32;
  if ((bits & 0x7c00) == 0x7c00) value = reinterpret<f32>(magnitude | 0x7f800000);
  else value = reinterpret<f32>(magnitude) * HALF_TO_FLOAT_SCALE;
  return reinterpret<f32>(reinterpret<u32>(value) | ((bits & 0x8000) << 16));
}
