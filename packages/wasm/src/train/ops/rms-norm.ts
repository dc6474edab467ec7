/**
 * RMSNorm over rows, forward and backward: y = x / rms(x) * (unitOffset + w),
 * rms(x) = sqrt(mean(x²) + eps). The norm weight is frozen; the backward gives
 * the input's gradient.
 */

/** out [rows, dim] (may alias x); returns each row's 1 / rms, which the backward needs. */
export function rmsNormForward(
  out: Float32Array,
  x: Float32Array,
  weight: Float32Array,
  rows: number,
  dim: number,
  eps: number,
  unitOffset: number,
): Float64Array {
  const inverse = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * dim;
    let sum = 0;
    for (let i = 0; i < dim; i++) sum += x[base + i]! * x[base + i]!;
    const inv = 1 / Math.sqrt(sum / dim + eps);
    inverse[r] = inv;
    for (let i = 0; i < dim; i++) out[base + i] = x[base + i]! * inv * (unitOffset + weight[i]!);
  }
  return inverse;
}

/**
 * dx [rows, dim] += ∂y/∂x ᵀ dy, with x the forward's input and `inverse` its
 * 1 / rms per row: dx = inv · g·dy − inv³ / dim · x · Σ(g·dy·x), g = unitOffset + w.
 */
export function rmsNormBackward(
  dx: Float32Array,
  dy: Float32Array,
  x: Float32Array,
  weight: Float32Array,
  inverse: Float64Array,
  rows: number,
  dim: number,
  unitOffset: number,
): void {
  for (let r = 0; r < rows; r++) {
    const base = r * dim;
    const inv = inverse[r]!;
    let dot = 0;
    for (let i = 0; i < dim; i++) dot += (unitOffset + weight[i]!) * dy[base + i]! * x[base + i]!;
    const k = (inv * inv * inv * dot) / dim;
    for (let i = 0; i < dim; i++) {
      dx[base + i] = dx[base + i]! + inv * (unitOffset + weight[i]!) * dy[base + i]! - k * x[base + i]!;
    }
  }
}
