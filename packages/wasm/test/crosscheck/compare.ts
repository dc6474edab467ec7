/**
 * How close the wasm engine must come to llama.cpp, and why.
 *
 * Both run the same weights (the formats tests prove llama.cpp decodes our
 * quantized bytes exactly as our dequantizer does), but not the same
 * arithmetic. llama.cpp's CPU backend rounds the activations to the weight
 * type's partner encoding before each matmul (F16 for F16 weights, BF16 for
 * BF16, 8-bit Q8_0/Q8_1/Q8_K blocks with F16 scales for quantized ones). The
 * engine's reference kernels multiply the dequantized weights by the float
 * activations; its WebAssembly kernels quantize activations to 8-bit blocks of
 * their own for some types, rounded differently from llama.cpp's. Each case
 * therefore states the largest logit difference it accepts; greedy decoding
 * must agree wherever llama.cpp's own choice is decisive by more than twice
 * that (then no admissible difference can flip the arg max).
 */
import assert from "node:assert/strict";
import { cosineSimilarity, maxAbsDifference, spread } from "@infer/core/testing";
import { GgmlType } from "@infer/formats";

export { cosineSimilarity, maxAbsDifference, spread };

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
 * Largest |Δlogit| / spread accepted, by how the matrices are stored, for the
 * two-layer models and for the six-layer Gemma 3 ones. Gemma 3 differs more:
 * ggml's CPU GELU rounds its input to F16 and reads the result from an F16
 * table (ggml-cpu vec.h, GGML_GELU_FP16), ~1e-3 relative per activation even
 * in float32, and six layers compound every difference. Each limit is about
 * twice to three times the largest difference observed on the random models
 * of this folder (noted beside it).
 */
const LIMITS = {
  // Float32 on both sides: only the summation order differs (observed 7e-7; Gemma 3 1.5e-3).
  float: { others: 1e-5, gemma3: 3e-3 },
  // F16 keeps 11 significant bits, ~5e-4 relative per activation (observed 1.1e-3; Gemma 3 4.1e-3).
  f16: { others: 0.005, gemma3: 0.01 },
  // BF16 keeps 8 significant bits, ~4e-3 relative per activation (observed 7.2e-3; Gemma 3 0.028).
  bf16: { others: 0.025, gemma3: 0.06 },
  // 8-bit activation blocks, ~0.4% relative per matmul, compounded over the layers; observed 0.026 (Gemma 3 0.074)
  // on the reference kernels, 0.043 (Gemma 3 0.081) on the WebAssembly kernels' own 8-bit activations.
  quantized: { others: 0.08, gemma3: 0.15 },
};

function limit(kind: keyof typeof LIMITS, architecture: string): number {
  return architecture === "gemma3" ? LIMITS[kind].gemma3 : LIMITS[kind].others;
}

/** Same weights, float32 arithmetic on both sides. */
export function floatArithmetic(architecture: string): Tolerance {
  return {
    cosine: 0.99999,
    relative: limit("float", architecture),
    why: architecture === "gemma3" ? "float32 on both sides; ggml's GELU goes through an F16 table" : "float32 on both sides",
  };
}

/** The tolerance for a file whose matrices are stored as `type`, compared as stored. */
export function toleranceFor(type: GgmlType, architecture: string): Tolerance {
  switch (type) {
    case GgmlType.F32:
      return floatArithmetic(architecture);
    case GgmlType.F16:
      return { cosine: 0.999, relative: limit("f16", architecture), why: "llama.cpp rounds activations to F16 for F16 weights" };
    case GgmlType.BF16:
      return { cosine: 0.999, relative: limit("bf16", architecture), why: "llama.cpp rounds activations to BF16 for BF16 weights" };
    default:
      return {
        cosine: 0.999,
        relative: limit("quantized", architecture),
        why: "llama.cpp quantizes activations to 8-bit blocks for quantized weights",
      };
  }
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
