/**
 * The attention probe's weights against the attention kernel itself: with
 * each cached value a one-hot row (position j's value is 1 at dim j), the
 * kernel's output for a query is exactly its weights over the positions.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { attentionWeights } from "../../src/engine/attention-weights.js";
import { KVCache } from "../../src/engine/cache.js";
import type { ModelConfig } from "../../src/engine/config.js";
import { referenceAttention } from "../../src/kernels/reference.js";
import { randomArray } from "./helpers.js";

const numHeads = 4;
const numKVHeads = 2;
const headDim = 8;
const kvDim = numKVHeads * headDim;

for (const { window, softcap } of [
  { window: 0, softcap: 0 },
  { window: 3, softcap: 0 },
  { window: 0, softcap: 0.5 },
]) {
  it(`weights equal the kernel's (window ${window}, softcap ${softcap})`, () => {
    const config = { numLayers: 1, numHeads, numKVHeads, headDim, attentionScale: 1 / Math.sqrt(headDim), attentionSoftcap: softcap } as ModelConfig;
    const cache = new KVCache(config, 2, headDim);
    const seq = 1;
    const position = 5;
    for (let j = 0; j <= position; j++) {
      const value = new Float32Array(kvDim);
      for (let h = 0; h < numKVHeads; h++) value[h * headDim + j] = 1;
      cache.store(0, cache.offset(seq, j), randomArray(100 + j, kvDim, 2), value);
    }
    const q = randomArray(7, numHeads * headDim, 2);
    const out = new Float32Array(numHeads * headDim);
    referenceAttention(out, q, cache.keys[0]!, cache.values[0]!, {
      tokens: 1,
      numHeads,
      numKVHeads,
      headDim,
      positions: Int32Array.of(position),
      seqIds: Int32Array.of(seq),
      slotLength: cache.contextLength,
      scale: config.attentionScale,
      window,
      softcap,
    });
    const weights = attentionWeights(config, cache, 0, q, 0, seq, position, window);
    assert.equal(weights.length, numHeads);
    for (let h = 0; h < numHeads; h++) {
      assert.equal(weights[h]!.length, position + 1);
      for (let j = 0; j <= position; j++) {
        assert.ok(Math.abs(weights[h]![j]! - out[h * headDim + j]!) < 1e-6, `head ${h} position ${j}: ${weights[h]![j]} vs ${out[h * headDim + j]}`);
      }
      if (window > 0) for (let j = 0; j <= position - window; j++) assert.equal(weights[h]![j], 0, `outside the window at ${j}`);
    }
  });
}
