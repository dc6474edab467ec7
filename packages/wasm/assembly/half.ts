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
