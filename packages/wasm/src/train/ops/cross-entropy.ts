/**
 * Cross-entropy over the vocabulary, softmax included: the loss of rows with a
 * target, and the gradient of their logits (softmax − one-hot) times a scale.
 */
import type { Kernels } from "../../kernels/types.js";

/**
 * logits [rows, vocab]; targets [rows] (−1: no target, no loss, zero gradient).
 * Returns the summed loss (float64), added row by row to `lossSoFar` so that
 * rows taken in chunks sum exactly as in one pass. When dLogits is given it receives
 * (softmax − one-hot) · gradScale, overwriting it; it may be logits itself
 * (each row is read before its gradient replaces it), which spares a second
 * buffer the size of the logits. On the kernels' crossEntropy where they have
 * one (float32 logits, the gradient written over them or none), else the
 * float64 reference here.
 */
export function crossEntropy(
  logits: Float32Array,
  targets: Int32Array,
  rows: number,
  vocab: number,
  dLogits?: Float32Array,
  gradScale = 1,
  lossSoFar = 0,
  kernels?: Kernels,
): number {
  let loss = lossSoFar;
  if (kernels?.crossEntropy && logits instanceof Float32Array && (dLogits === undefined || dLogits === logits)) {
    const losses = new Float64Array(rows);
    kernels.crossEntropy(logits, targets, rows, vocab, losses, gradScale, dLogits !== undefined);
    for (let r = 0; r < rows; r++) loss += losses[r]!;
    return loss;
  }
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
