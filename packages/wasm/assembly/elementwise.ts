// The light steps between the matmuls (RMSNorm, RoPE, residual and bias adds),
// computed as src/kernels/ops.ts computes them, in float64 where it does and
// in the same order, so both give the same bits. They run on the calling
// thread: even a prefill chunk's norms are less work than handing them to the
// pool would cost.

/**
 * out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * (unitOffset + weight)
 * for r < rows; x, out: [rows, dim] f32 (out may be x); weight: [dim] f32.
 */
export function rmsNorm(out: usize, x: usize, weight: usize, rows: i32, dim: i32, eps: f64, unitOffset: f64): void {
  const rowBytes = <usize>dim << 2;
  for (let r = 0; r < rows; r++) {
    // Running sums of squares, as ops.ts's sumOfSquares: of elements 4k and 4k+1 (s0, s1) in `front`, 4k+2 and 4k+3 (s2, s3) in `back`.
    let front = f64x2.splat(0);
    let back = f64x2.splat(0);
    let i = 0;
    for (; i + 4 <= dim; i += 4) {
      const v = v128.load(x + (<usize>i << 2));
      const low = f64x2.promote_low_f32x4(v);
      const high = f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1));
      front = f64x2.add(front, f64x2.mul(low, low));
      back = f64x2.add(back, f64x2.mul(high, high));
    }
    const pairs = f64x2.add(front, back); // (s0 + s2, s1 + s3)
    let sumSquares = f64x2.extract_lane(pairs, 0) + f64x2.extract_lane(pairs, 1);
    for (; i < dim; i++) {
      const value = <f64>load<f32>(x + (<usize>i << 2));
      sumSquares += value * value;
    }
    const inverse = f64x2.splat(1 / Math.sqrt(sumSquares / dim + eps));
    const offset = f64x2.splat(unitOffset);
    i = 0;
    // Two elements at a time: (x * inverse) * (unitOffset + w) in float64, rounded to f32 once.
    for (; i + 2 <= dim; i += 2) {
      const at = <usize>i << 2;
      const values = f64x2.promote_low_f32x4(v128.load64_zero(x + at));
      const weights = f64x2.add(offset, f64x2.promote_low_f32x4(v128.load64_zero(weight + at)));
      v128.store64_lane(out + at, f32x4.demote_f64x2_zero(f64x2.mul(f64x2.mul(values, inverse), weights)), 0);
    }
    if (i < dim) {
      const at = <usize>i << 2;
      store<f32>(out + at, <f32>(<f64>load<f32>(x + at) * f64x2.extract_lane(inverse, 0) * (unitOffset + <f64>load<f32>(weight + at))));
    }
    x += rowBytes;
    out += rowBytes;
  }
}

/**
 * Rotates the first 2 * pairs dims of each head of x: [tokens, heads, headDim]
 * f32 in place, token t's pair i by cos and sin: [tokens, pairs] f64 (the
 * rotation table, magnitude included). neox: pair i is (i, i + pairs) (rotate_half);
 * otherwise (2i, 2i + 1).
 */
export function rope(x: usize, tokens: i32, heads: i32, headDim: i32, cos: usize, sin: usize, pairs: i32, neox: bool): void {
  const second = neox ? <usize>pairs << 2 : 4; // bytes from a pair's first element to its second
  const step: usize = neox ? 4 : 8; // bytes from one pair's first element to the next one's
  for (let t = 0; t < tokens; t++) {
    const row = <usize>t * <usize>pairs << 3;
    for (let h = 0; h < heads; h++) {
      let a = x + ((<usize>t * <usize>heads + <usize>h) * <usize>headDim << 2);
      for (let i = 0; i < pairs; i++) {
        const c = load<f64>(cos + row + (<usize>i << 3));
        const s = load<f64>(sin + row + (<usize>i << 3));
        const x0 = <f64>load<f32>(a);
        const x1 = <f64>load<f32>(a + second);
        store<f32>(a, <f32>(x0 * c - x1 * s));
        store<f32>(a + second, <f32>(x0 * s + x1 * c));
        a += step;
      }
    }
  }
}

/** x[i] += y[i % period] for i < count (count a multiple of period): a residual add (period = count) or a bias per row. */
export function addRepeated(x: usize, y: usize, count: i32, period: i32): void {
  for (let start = 0; start < count; start += period) {
    let i = 0;
    for (; i + 4 <= period; i += 4) {
      const at = <usize>i << 2;
      v128.store(x + at, f32x4.add(v128.load(x + at), v128.load(y + at)));
    }
    for (; i < period; i++) {
      const at = <usize>i << 2;
      store<f32>(x + at, load<f32>(x + at) + load<f32>(y + at));
    }
    x += <usize>period << 2;
  }
}

/**
 * The index of the largest of x[0, count), the first one on ties, NaNs never
 * chosen, 0 when nothing beats -Infinity: sampling.ts's `argmax`, for greedy
 * decoding over a vocabulary of logits (a compare per vocabulary entry every
 * token, one at a time in JavaScript). Two accumulators of four lanes keep each lane's best value
 * and its first index; the lanes then settle on the largest value and, among
 * equals, the smallest index, which is the first occurrence overall.
 */
export function argmax(x: usize, count: i32): i32 {
  let best0 = f32x4.splat(-Infinity);
  let best1 = best0;
  let at0 = i32x4.splat(-1);
  let at1 = at0;
  let index0 = i32x4(0, 1, 2, 3);
  let index1 = i32x4(4, 5, 6, 7);
  const step = i32x4.splat(8);
  let i = 0;
  for (; i + 8 <= count; i += 8) {
    const v0 = v128.load(x + (<usize>i << 2));
    const v1 = v128.load(x + (<usize>i << 2), 16);
    const better0 = f32x4.gt(v0, best0);
    const better1 = f32x4.gt(v1, best1);
    best0 = v128.bitselect(v0, best0, better0);
    best1 = v128.bitselect(v1, best1, better1);
    at0 = v128.bitselect(index0, at0, better0);
    at1 = v128.bitselect(index1, at1, better1);
    index0 = i32x4.add(index0, step);
    index1 = i32x4.add(index1, step);
  }
  chosenValue = -Infinity;
  chosenAt = -1;
  consider(f32x4.extract_lane(best0, 0), i32x4.extract_lane(at0, 0));
  consider(f32x4.extract_lane(best0, 1), i32x4.extract_lane(at0, 1));
  consider(f32x4.extract_lane(best0, 2), i32x4.extract_lane(at0, 2));
  consider(f32x4.extract_lane(best0, 3), i32x4.extract_lane(at0, 3));
  consider(f32x4.extract_lane(best1, 0), i32x4.extract_lane(at1, 0));
  consider(f32x4.extract_lane(best1, 1), i32x4.extract_lane(at1, 1));
  consider(f32x4.extract_lane(best1, 2), i32x4.extract_lane(at1, 2));
  consider(f32x4.extract_lane(best1, 3), i32x4.extract_lane(at1, 3));
  for (; i < count; i++) {
    const value = load<f32>(x + (<usize>i << 2));
    if (value > chosenValue) {
      chosenValue = value;
      chosenAt = i;
    }
  }
  return chosenAt < 0 ? 0 : chosenAt;
}

/** argmax's pick among the lanes so far (this instance's own globals: argmax runs on one thread). */
let chosenValue: f32 = -Infinity;
let chosenAt: i32 = -1;

/** A lane's best (`at` -1: the lane saw nothing above -Infinity) against the pick: larger wins, the first index on ties. */
function consider(value: f32, at: i32): void {
  if (at < 0) return;
  if (chosenAt < 0 || value > chosenValue || (value == chosenValue && at < chosenAt)) {
    chosenValue = value;
    chosenAt = at;
  }
}
