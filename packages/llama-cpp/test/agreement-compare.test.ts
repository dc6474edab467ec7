/**
 * The agreement test's measures on hand-made inputs, in particular the
 * near-tie rule, which the real models (all 32 greedy tokens identical)
 * never reach.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LogitsSummaryPayload } from "@infer/core";
import { assertGreedyAgrees, cosineSimilarity, maxAbsDifference, spread, topTwo } from "./agreement-compare.js";

/** A probe summary whose top ids come with the given logits, best first. */
function summary(topIds: number[], topLogits: number[]): LogitsSummaryPayload {
  return { topIds, topLogits, entropy: 1, vocabSize: 100 };
}

describe("agreement measures", () => {
  it("cosine, spread, largest difference and top two", () => {
    assert.equal(cosineSimilarity([1, 0], [0, 1]), 0);
    assert.ok(Math.abs(cosineSimilarity([1, 2, 3], [2, 4, 6]) - 1) < 1e-12);
    assert.equal(spread([1, 3, 1, 3]), 1);
    assert.equal(maxAbsDifference([1, 2, 3], [1, 2.5, 2]), 1);
    assert.deepEqual(topTwo([0.5, 3, -1, 2.75]), { best: 1, gap: 0.25 });
  });

  it("identical continuations agree on every step", () => {
    assert.equal(assertGreedyAgrees([4, 5, 6], [4, 5, 6], [], 0.01, "same"), 3);
  });

  it("a split at a near-tie in the engine's logits ends the comparison there", () => {
    const steps = [summary([4, 9], [2, 1]), summary([5, 7, 8], [3, 2.995, 1])];
    assert.equal(assertGreedyAgrees([4, 5, 6], [4, 7, 1], steps, 0.01, "tie"), 1);
  });

  it("a split where the engine's choice was decisive fails", () => {
    const steps = [summary([4, 9], [2, 1]), summary([5, 7], [3, 2.5])];
    assert.throws(() => assertGreedyAgrees([4, 5, 6], [4, 7, 6], steps, 0.01, "decisive"), /by 0\.5 logits, more than the near-tie margin/);
  });

  it("a split to a token outside the engine's top five fails", () => {
    const steps = [summary([4, 1, 2, 3, 8], [2, 1.999, 1.998, 1.997, 1.996])];
    assert.throws(() => assertGreedyAgrees([4], [9], steps, 0.01, "outside"), /not in wasm's top 5/);
  });

  it("a split with no probe summary for the step, or continuations of different lengths, fail", () => {
    assert.throws(() => assertGreedyAgrees([4, 5], [4, 6], [], 0.01, "no probe"), /reported no logits/);
    assert.throws(() => assertGreedyAgrees([4, 5], [4], [], 0.01, "lengths"), /continuation lengths differ/);
  });
});
