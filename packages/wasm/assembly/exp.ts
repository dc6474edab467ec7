// The exponential in f32x4, shared by the softmax (attention.ts) and SiLU (activation.ts).

/**
 * e^x for four lanes of x <= 0 (softmax weights after subtracting the
 * maximum): x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-7 polynomial
 * (Cephes' expf coefficients), 2^n put into the exponent bits. Within 2 ulp
 * of e^x for x >= -87; below that (weights under 1e-38) the lanes are flushed to 0.
 */
export function exp4(x: v128): v128 {
  const small = f32x4.lt(x, f32x4.splat(-87));
  // Clamped to -87 by a select, not f32x4.max (eight instructions in V8): a NaN lane stays NaN.
  const clamped = v128.bitselect(f32x4.splat(-87), x, small);
  // n = x log2(e) rounded to nearest (even): adding 1.5 * 2^23 rounds it into the low mantissa
  // bits, which then are n as an integer too, with no f32x4.nearest and no saturating conversion
  // (about ten instructions in V8); the same n for |x log2(e)| < 2^22.
  const shifted = f32x4.add(f32x4.mul(clamped, f32x4.splat(1.442695041)), f32x4.splat(12582912.0));
  const n = f32x4.sub(shifted, f32x4.splat(12582912.0));
  // ln 2 in two parts: n * 0.693359375 is exact, so r keeps its low bits.
  const r = f32x4.sub(f32x4.sub(clamped, f32x4.mul(n, f32x4.splat(0.693359375))), f32x4.mul(n, f32x4.splat(-2.12194440e-4)));
  let p = f32x4.splat(1.9875691500e-4);
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.3981999507e-3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(8.3334519073e-3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(4.1665795894e-2));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.6666665459e-1));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(5.0000001201e-1));
  p = f32x4.add(f32x4.add(f32x4.mul(f32x4.mul(p, r), r), r), f32x4.splat(1));
  // 2^n: n + 127 in the exponent bits (shifted's bits minus 1.5 * 2^23's are n).
  const scale = i32x4.shl(i32x4.sub(shifted, i32x4.splat(0x4b400000 - 127)), 23);
  return v128.andnot(f32x4.mul(p, scale), small);
}
