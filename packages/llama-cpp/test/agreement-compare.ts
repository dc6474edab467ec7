/**
 * Measures for comparing two backends' outputs on the same model: logit
 * similarity at a prompt's last position, and greedy continuations that must
 * match except where the choice was a near-tie no float arithmetic could be
 * trusted to break the same way.
 */
import assert from "node:assert/strict";
import type { LogitsSummaryPayload } from "@infer/core";
import { cosineSimilarity, maxAbsDifference, spread, topTwo } from "@infer/core/testing";

export { cosineSimilarity, maxAbsDifference, spread, topTwo };

/**
 * Checks two greedy continuations of one prompt. They must be identical,
 * except that they may part at a step where the wasm engine's own choice and
 * llama.cpp's were within `tieMargin` logits of each other in the engine's
 * logits there (its probe's top 5), i.e. a near-tie that the tolerated logit
 * differences could flip; the comparison ends at that step, since the
 * continuations no longer share a prefix. Returns how many steps agreed.
 */
export function assertGreedyAgrees(
  wasm: readonly number[],
  llamaCpp: readonly number[],
  wasmSteps: readonly LogitsSummaryPayload[],
  tieMargin: number,
  label: string,
): number {
  assert.equal(wasm.length, llamaCpp.length, `${label}: continuation lengths differ (wasm ${wasm.length}, llama_cpp ${llamaCpp.length})`);
  for (let step = 0; step < wasm.length; step++) {
    if (wasm[step] === llamaCpp[step]) continue;
    const both = `wasm ${JSON.stringify(wasm)}, llama_cpp ${JSON.stringify(llamaCpp)}`;
    const summary = wasmSteps[step];
    assert.ok(summary, `${label}: step ${step} differs and the wasm probe reported no logits for it (${both})`);
    assert.equal(summary.topIds[0], wasm[step], `${label}: the wasm probe's top token at step ${step} is the token it emitted`);
    const at = summary.topIds.indexOf(llamaCpp[step]!);
    assert.ok(at > 0, `${label}: step ${step}: llama_cpp chose ${llamaCpp[step]}, not in wasm's top 5 ${JSON.stringify(summary.topIds)} (${both})`);
    const margin = summary.topLogits[0]! - summary.topLogits[at]!;
    assert.ok(
      margin <= tieMargin,
      `${label}: step ${step}: wasm chose ${wasm[step]} over llama_cpp's ${llamaCpp[step]} by ${margin} logits, ` +
        `more than the near-tie margin ${tieMargin} (${both})`,
    );
    return step;
  }
  return wasm.length;
}
