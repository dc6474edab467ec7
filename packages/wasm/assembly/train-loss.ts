// Training's cross-entropy over the vocabulary, softmax included, in f32x4
// (src/train/ops/cross-entropy.ts holds the float64 TypeScript reference):
// logits [rows, vocab] f32, targets [rows] i32 (−1: no target), losses [rows]
// f64. Threads split the rows; a row's gradient is written over its logits.

import { exp4 } from "./exp";

/** Floats summed in f32x4 before the sum moves to f64: short enough that f32 rounding stays far below the loss's tolerance. */
const BLOCK = 256;

/**
 * Rows [start, end): each row's loss log Σ exp(logits) − logits[target] into
 * losses (0 for a row without a target); with `gradient`, the row's logits
 * replaced by (softmax − one-hot) · gradScale (zeros for a row without a target).
 * A NaN logit makes its row's loss NaN, as in the reference.
 */
export function crossEntropyRows(logits: usize, targets: usize, losses: usize, vocab: i32, gradScale: f32, gradient: i32, start: i32, end: i32): void {
  const vectors = vocab & ~3;
  for (let r = start; r < end; r++) {
    const row = logits + ((<usize>r * <usize>vocab) << 2);
    const target = load<i32>(targets + (<usize>r << 2));
    if (target < 0) {
      store<f64>(losses + (<usize>r << 3), 0);
      if (gradient) memory.fill(row, 0, <usize>vocab << 2);
      continue;
    }
    // The maximum (f32x4.max keeps a NaN lane NaN, as Math.max does).
    let high = f32x4.splat(-Infinity);
    for (let v = 0; v < vectors; v += 4) high = f32x4.max(high, v128.load(row + (<usize>v << 2)));
    let max = Mathf.max(Mathf.max(f32x4.extract_lane(high, 0), f32x4.extract_lane(high, 1)), Mathf.max(f32x4.extract_lane(high, 2), f32x4.extract_lane(high, 3)));
    for (let v = vectors; v < vocab; v++) max = Mathf.max(max, load<f32>(row + (<usize>v << 2)));
    // Σ exp(logit − max): BLOCK floats at a time in f32x4, the blocks' sums in f64.
    const shift = f32x4.splat(max);
    let total: f64 = 0;
    for (let from = 0; from < vectors; from += BLOCK) {
      const to = min(vectors, from + BLOCK);
      let sum = f32x4.splat(0);
      for (let v = from; v < to; v += 4) sum = f32x4.add(sum, exp4(f32x4.sub(v128.load(row + (<usize>v << 2)), shift)));
      total += <f64>f32x4.extract_lane(sum, 0) + <f64>f32x4.extract_lane(sum, 1) + <f64>f32x4.extract_lane(sum, 2) + <f64>f32x4.extract_lane(sum, 3);
    }
    for (let v = vectors; v < vocab; v++) total += Math.exp(<f64>(load<f32>(row + (<usize>v << 2)) - max));
    const logTotal = Math.log(total) + <f64>max;
    store<f64>(losses + (<usize>r << 3), logTotal - <f64>load<f32>(row + (<usize>target << 2)));
    if (!gradient) continue;
    // softmax · gradScale = exp(logit − max) · (gradScale / total).
    const factor = <f32>(<f64>gradScale / total);
    const scale = f32x4.splat(factor);
    for (let v = 0; v < vectors; v += 4) {
      const at = row + (<usize>v << 2);
      v128.store(at, f32x4.mul(exp4(f32x4.sub(v128.load(at), shift)), scale));
    }
    for (let v = vectors; v < vocab; v++) {
      const at = row + (<usize>v << 2);
      store<f32>(at, <f32>Math.exp(<f64>(load<f32>(at) - max)) * factor);
    }
    const at = row + (<usize>target << 2);
    store<f32>(at, load<f32>(at) - gradScale);
  }
}
