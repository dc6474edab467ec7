/**
 * Cross-entropy over the vocabulary, softmax included: the loss of rows with a
 * target, and the gradient of their logits (softmax − one-hot) times a scale.
 */

/**
 * logits [rows, vocab]; targets [rows] (−1: no target, no loss, zero gradient).
 * Returns the summed loss (float64), added row by row to `lossSoFar` so that
 * rows taken in chunks sum exactly as in one pass. When dLogits is given it receives
 * (softmax − one-hot) · gradScale, overwriting it; it may be logits itself
 * (each row is read before its gradient replaces it), which spares a second
 * buffer the size of the logits.
 */
export function crossEntropy(
  logits: Float32Array,
  targets: Int32Array,
  rows: number,
  vocab: number,
  dLogits?: Float32Array,
  gradScale = 1,
  lossSoFar = 0,
): number {
  let loss = lossSoFar;
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    const target = targets[r]!;
    if (target < 0) {
      dLogits?.fill(0, base, base + vocab);
      continue;
    }
    let max = -Infinity;
    for (let v = 0; v < vocab; v++) max = Math.max(max, logits[base + v]!);
    let total = 0;
    for (let v = 0; v < vocab; v++) total += Math.exp(logits[base + v]! - max);
    const logTotal = Math.log(total) + max;
    loss += logTotal - logits[base + target]!;
    if (dLogits) {
      for (let v = 0; v < vocab; v++) dLogits[base + v] = Math.exp(logits[base + v]! - logTotal) * gradScale;
      dLogits[base + target] = dLogits[base + target]! - gradScale;
    }
  }
  return loss;
}
