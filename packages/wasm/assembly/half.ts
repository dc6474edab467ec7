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
  return halvesToFloatsWith(bits, f32x4.splat(HALF_TO_FLOAT_SCALE), i32x4.splat(HALF_FINITE_LIMIT), i32x4.splat(FLOAT_EXPONENT));
}

/** finiteHalvesWith's mask: the sign and the exponent and mantissa, not the sign's copies in bits 28-30. */
const FINITE_HALVES_MASK = 0x8fffffff;

/** Float32 bits of the largest finite half's magnitude shifted into float32 position (above it: exponent 31). */
const HALF_FINITE_LIMIT = 0x0f7fffff;
const FLOAT_EXPONENT = 0x7f800000;

/**
 * halvesToFloats's three vector constants as data, for loops that load them once
 * (halfConstant) and pass them to halvesToFloatsWith: V8 rebuilds a vector
 * constant written inline at every use (three instructions each, inside the
 * loop), while a loaded value is one it can keep in a register.
 */
const HALF_CONSTANTS = memory.data<u32>([
  0x77800000, 0x77800000, 0x77800000, 0x77800000, // HALF_TO_FLOAT_SCALE
  HALF_FINITE_LIMIT, HALF_FINITE_LIMIT, HALF_FINITE_LIMIT, HALF_FINITE_LIMIT,
  FLOAT_EXPONENT, FLOAT_EXPONENT, FLOAT_EXPONENT, FLOAT_EXPONENT,
  0x71800000, 0x71800000, 0x71800000, 0x71800000, // 2^100: halves times 2^-12 (HALF_SCALE_OVER_4096)
  FINITE_HALVES_MASK, FINITE_HALVES_MASK, FINITE_HALVES_MASK, FINITE_HALVES_MASK,
  0x7fff7fff, 0x7fff7fff, 0x7fff7fff, 0x7fff7fff, // a half's magnitude bits, in 16-bit lanes
]);

/** halfConstant's index of finiteHalvesWith's mask. */
export const FINITE_MASK = 4;
/** halfConstant's index of 0x7fff in every 16-bit lane. */
export const MAGNITUDE_BITS = 5;

/**
 * halfConstant's index of the scale 2^100 in place of 2^112: halvesToFloatsWith then gives the
 * halves times 2^-12, exactly (a power of two, the results far from float32's subnormals;
 * infinities and NaNs as before, their mantissas kept).
 */
export const HALF_SCALE_OVER_4096 = 3;

/** HALF_CONSTANTS' vector `which`: halvesToFloatsWith's 0 scale, 1 finite limit, 2 exponent (and 3, 4, 5 above). */
export function halfConstant(which: i32): v128 {
  return v128.load(HALF_CONSTANTS + (<usize>which << 4));
}

/** halvesToFloats with its constants given (halfConstant(0), (1), (2)). */
export function halvesToFloatsWith(bits: v128, scale: v128, finiteLimit: v128, exponent: v128): v128 {
  const magnitude = i32x4.shr_u(i32x4.shl(bits, 17), 4); // exponent and mantissa in float32 position
  const scaled = f32x4.mul(magnitude, scale);
  const special = v128.and(i32x4.gt_s(magnitude, finiteLimit), exponent); // exponent 31
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
 * Its constants come in from the caller's loop, which loads them once:
 * halfConstant(FINITE_MASK) and halfConstant(0).
 */
export function finiteHalvesWith(upper: v128, mask: v128, scale: v128): v128 {
  return f32x4.mul(v128.and(i32x4.shr_s(upper, 3), mask), scale);
}
