// Activations quantized on the fly to blocks of 32 int8 values with one float
// scale (ggml's Q8_0 shape, kept as separate arrays), so matmul against
// quantized weights runs as integer dot products. Each block also records the
// float sum of its 32 inputs, which weight types with a per-block minimum
// (Q4_K) need: sum_i (d*q_i - m) * x_i = d * (q·x) - m * sum_i x_i.

export const Q8_BLOCK = 32;

/**
 * x: [count, cols] f32. Writes xq: [count, cols] i8, xd: [count, cols / 32] f32
 * scales and xs: [count, cols / 32] f32 block sums. cols is a multiple of 32.
 */
export function quantizeActivations(x: usize, count: i32, cols: i32, xq: usize, xd: usize, xs: usize): void {
  const blocks = (count * cols) / Q8_BLOCK;
  for (let b = 0; b < blocks; b++) {
    const v0 = v128.load(x, 0);
    const v1 = v128.load(x, 16);
    const v2 = v128.load(x, 32);
    const v3 = v128.load(x, 48);
    const v4 = v128.load(x, 64);
    const v5 = v128.load(x, 80);
    const v6 = v128.load(x, 96);
    const v7 = v128.load(x, 112);
    let amax = f32x4.max(
      f32x4.max(f32x4.max(f32x4.abs(v0), f32x4.abs(v1)), f32x4.max(f32x4.abs(v2), f32x4.abs(v3))),
      f32x4.max(f32x4.max(f32x4.abs(v4), f32x4.abs(v5)), f32x4.max(f32x4.abs(v6), f32x4.abs(v7))),
    );
    amax = f32x4.max(amax, i32x4.shuffle(amax, amax, 2, 3, 0, 1));
    amax = f32x4.max(amax, i32x4.shuffle(amax, amax, 1, 0, 3, 2));
    const maxAbs = f32x4.extract_lane(amax, 0);
    const inverse = f32x4.splat(maxAbs > 0 ? 127 / maxAbs : 0);
    store<f32>(xd, maxAbs / 127);
    const low = i8x16.narrow_i16x8_s(
      i16x8.narrow_i32x4_s(roundToInt(v0, inverse), roundToInt(v1, inverse)),
      i16x8.narrow_i32x4_s(roundToInt(v2, inverse), roundToInt(v3, inverse)),
    );
    const high = i8x16.narrow_i16x8_s(
      i16x8.narrow_i32x4_s(roundToInt(v4, inverse), roundToInt(v5, inverse)),
      i16x8.narrow_i32x4_s(roundToInt(v6, inverse), roundToInt(v7, inverse)),
    );
    v128.store(xq, low, 0);
    v128.store(xq, high, 16);
    let sum = f32x4.add(f32x4.add(f32x4.add(v0, v1), f32x4.add(v2, v3)), f32x4.add(f32x4.add(v4, v5), f32x4.add(v6, v7)));
    sum = f32x4.add(sum, i32x4.shuffle(sum, sum, 2, 3, 0, 1));
    sum = f32x4.add(sum, i32x4.shuffle(sum, sum, 1, 0, 3, 2));
    store<f32>(xs, f32x4.extract_lane(sum, 0));
    x += 128;
    xq += 32;
    xd += 4;
    xs += 4;
  }
}

function roundToInt(v: v128, inverse: v128): v128 {
  return i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v, inverse)));
}
