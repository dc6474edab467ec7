/**
 * Measures for comparing two implementations' logits over one vocabulary:
 * what cross-backend and cross-implementation tests judge agreement by.
 */
import assert from "node:assert/strict";

export function cosineSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length, "logit vectors of different lengths");
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    normA += a[i]! * a[i]!;
    normB += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(normA * normB);
}

/** Standard deviation: the scale a logit difference is judged against (models' logit scales differ tenfold). */
export function spread(values: ArrayLike<number>): number {
  let mean = 0;
  for (let i = 0; i < values.length; i++) mean += values[i]!;
  mean /= values.length;
  let variance = 0;
  for (let i = 0; i < values.length; i++) variance += (values[i]! - mean) ** 2;
  return Math.sqrt(variance / values.length);
}

export function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length, "logit vectors of different lengths");
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

/** The arg max and the runner-up's distance below it. */
export function topTwo(values: ArrayLike<number>): { best: number; gap: number } {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  let second = -Infinity;
  for (let i = 0; i < values.length; i++) if (i !== best && values[i]! > second) second = values[i]!;
  return { best, gap: values[best]! - second };
}
