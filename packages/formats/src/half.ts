/**
 * IEEE half (f16) and bfloat16 conversions, bit-exact with ggml's
 * GGML_FP32_TO_FP16 / GGML_FP32_TO_BF16 (round to nearest, ties to even).
 */

// One shared scratch word for reinterpreting float bits; conversions are synchronous.
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

function bitsOf(value: number): number {
  scratchF32[0] = value;
  return scratchU32[0]!;
}

function floatOfBits(bits: number): number {
  scratchU32[0] = bits >>> 0;
  return scratchF32[0]!;
}

/** Decodes one f16 bit pattern (0..65535) to a number. */
export function f16ToF32(half: number): number {
  const sign = half & 0x8000 ? -1 : 1;
  const exponent = (half >>> 10) & 0x1f;
  const mantissa = half & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** Encodes a number (first rounded to f32, as C would hold it) as f16 bits, ties to even. */
export function f32ToF16(value: number): number {
  const bits = bitsOf(value);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 | (mantissa >>> 13) : 0);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Subnormal half: below 2^-25 everything rounds to zero.
    if (halfExponent < -10) return sign;
    const full = mantissa | 0x800000;
    const shift = 14 - halfExponent;
    return sign | roundShift(full, shift);
  }
  // The increment of roundShift may carry into the exponent, which is exactly right
  // (it also turns the largest values into infinity).
  return (sign | (halfExponent << 10)) + roundShift(mantissa, 13);
}

/** value >> shift, rounded to nearest with ties to even. */
function roundShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const remainder = value & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  return remainder > halfway || (remainder === halfway && (kept & 1) === 1) ? kept + 1 : kept;
}

/** Decodes one bfloat16 bit pattern to a number. */
export function bf16ToF32(bf16: number): number {
  return floatOfBits((bf16 & 0xffff) << 16);
}

/** Encodes a number as bfloat16 bits, ties to even; NaN stays a quiet NaN. */
export function f32ToBf16(value: number): number {
  const bits = bitsOf(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

let f16Table: Float32Array | undefined;

/** All 65536 f16 values decoded once: dequantizing whole models goes through here. */
export function f16Table65536(): Float32Array {
  if (!f16Table) {
    f16Table = new Float32Array(65536);
    for (let half = 0; half < 65536; half++) f16Table[half] = f16ToF32(half);
  }
  return f16Table;
}
