/**
 * How close the wasm engine must come to llama.cpp, and why.
 *
 * Both run the same weights (the formats tests prove llama.cpp decodes our
 * quantized bytes exactly as our dequantizer does), but not the same
 * arithmetic: the engine multiplies dequantized weights by float activations,
 * while llama.cpp's CPU backend first rounds the activations to the weight
 * type's partner encoding (F16 for F16 weights, BF16 for BF16, Q8_0/Q8_1/Q8_K
 * blocks for quantized ones) and runs the dot products on those. Each case
 * therefore states the largest logit difference it accepts; greedy decoding
 * must agree wherever llama.cpp's own choice is decisive by more than twice
 * that (then no admissible difference can flip the arg max).
 */
import assert from "node:assert/strict";
import { GgmlType } from "../../src/kernels/types.js";

export interface Tolerance {
  /** Least cosine similarity of the last-position logits. */
  cosine: number;
  /**
   * Largest |ours - llama.cpp| of any last-position logit, as a share of the
   * spread (standard deviation) of llama.cpp's logits there. Relative because
   * the models' logit scales differ tenfold (Gemma 3's tied, scaled embedding).
   */
  relative: number;
  /** Why this tolerance (quoted in failure messages). */
  why: string;
}

/**
 * Same weights, float32 arithmetic on both sides: only the summation order
 * differs (observed <= 7e-7 of the spread), except that ggml's CPU GELU, which
 * Gemma 3 uses, rounds its input to F16 and reads the result from an F16 table
 * (ggml-cpu vec.h, GGML_GELU_FP16): ~1e-3 relative per activation, observed
 * <= 7e-4 of the spread on the random Gemma 3 models.
 */
export function floatArithmetic(architecture: string): Tolerance {
  return architecture === "gemma3"
    ? { cosine: 0.99999, relative: 2e-3, why: "float32 on both sides; ggml's GELU goes through an F16 table" }
    : { cosine: 0.99999, relative: 1e-5, why: "float32 on both sides (only the summation order differs)" };
}

/** The tolerance for a file whose matrices are stored as `type`, compared as stored. */
export function toleranceFor(type: GgmlType, architecture: string): Tolerance {
  switch (type) {
    case GgmlType.F32:
      return floatArithmetic(architecture);
    case GgmlType.F16:
      // F16 keeps 11 significant bits, ~5e-4 relative per activation; observed <= 1.3e-3 of the spread.
      return { cosine: 0.999, relative: 0.005, why: "llama.cpp rounds activations to F16 for F16 weights" };
    case GgmlType.BF16:
      // BF16 keeps 8 significant bits, ~4e-3 relative per activation; observed <= 8.5e-3 of the spread.
      return { cosine: 0.999, relative: 0.025, why: "llama.cpp rounds activations to BF16 for BF16 weights" };
    default:
      // 8-bit activation blocks, ~0.4% relative per matmul, compounded over the layers;
      // observed <= 0.032 of the spread on these random models.
      return { cosine: 0.999, relative: 0.08, why: "llama.cpp quantizes activations to 8-bit blocks for quantized weights" };
  }
}

/** Standard deviation of the values: the scale logit differences are measured against. */
export function spread(values: ArrayLike<number>): number {
  let mean = 0;
  for (let i = 0; i < values.length; i++) mean += values[i]!;
  mean /= values.length;
  let variance = 0;
  for (let i = 0; i < values.length; i++) variance += (values[i]! - mean) ** 2;
  return Math.sqrt(variance / values.length);
}

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

export function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length, "logit vectors of different lengths");
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

/** Asserts that our logits are within `tolerance` of llama.cpp's; returns the measures. */
export function assertLogitsClose(
  ours: Float32Array,
  theirs: Float32Array,
  tolerance: Tolerance,
  label: string,
): { cosine: number; relative: number } {
  assert.equal(ours.length, theirs.length, `${label}: vocabulary sizes differ`);
  const cosine = cosineSimilarity(ours, theirs);
  const relative = maxAbsDifference(ours, theirs) / spread(theirs);
  assert.ok(cosine >= tolerance.cosine, `${label}: cosine ${cosine} < ${tolerance.cosine} (${tolerance.why})`);
  assert.ok(
    relative <= tolerance.relative,
    `${label}: max |Δlogit| is ${relative} of the logits' spread, > ${tolerance.relative} (${tolerance.why})`,
  );
  return { cosine, relative };
}

/**
 * Compares greedy continuations step by step. Identical tokens are required
 * while llama.cpp's top-2 gap exceeds twice the tolerated logit difference
 * (both relative to the spread of llama.cpp's logits at that step);
 * the first step where the two choose differently must be a near-tie for
 * llama.cpp, and the comparison ends there (the continuations no longer share
 * a prefix). Returns how many steps agreed.
 */
export function assertGreedyAgrees(
  ours: readonly number[],
  theirs: { tokens: readonly number[]; relativeGaps: readonly number[] },
  tolerance: Tolerance,
  label: string,
): number {
  assert.equal(ours.length, theirs.tokens.length, `${label}: continuation lengths differ`);
  const margin = 2 * tolerance.relative;
  for (let step = 0; step < ours.length; step++) {
    if (ours[step] === theirs.tokens[step]) continue;
    const gap = theirs.relativeGaps[step]!;
    assert.ok(
      gap < margin,
      `${label}: step ${step} chose ${ours[step]} where llama.cpp chose ${theirs.tokens[step]} by a gap of ${gap} of its logits' spread ` +
        `(> ${margin}, twice the tolerated difference: ${tolerance.why}); ours ${JSON.stringify(ours)}, llama.cpp ${JSON.stringify(theirs.tokens)}`,
    );
    return step;
  }
  return ours.length;
}
