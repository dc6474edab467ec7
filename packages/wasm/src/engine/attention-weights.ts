/**
 * The attention weights behind one query row, recomputed from the rotated
 * query and the cached keys exactly as the attention kernels weigh them
 * (scale, softcap, sliding window, grouped KV heads), for attention probes.
 */
import type { KVCache } from "./cache.js";
import type { ModelConfig } from "./config.js";

/**
 * Weights of each query head of batch row `row` (at `position` of cache slot
 * `seq`) over positions 0 .. position of `layer`: [numHeads][position + 1],
 * zero outside a sliding `window` (0 = full). `q`: [tokens, numHeads, headDim].
 */
export function attentionWeights(
  config: ModelConfig,
  cache: KVCache,
  layer: number,
  q: Float32Array,
  row: number,
  seq: number,
  position: number,
  window: number,
): Float32Array[] {
  const { numHeads, numKVHeads, headDim, attentionScale, attentionSoftcap } = config;
  const group = numHeads / numKVHeads;
  const first = window > 0 ? Math.max(0, position - window + 1) : 0;
  const keys = cache.readKeys(layer, cache.offset(seq, 0), (position + 1) * cache.kvDim); // [position + 1, kvDim]
  return Array.from({ length: numHeads }, (_, h) => {
    const qBase = (row * numHeads + h) * headDim;
    const kvHead = Math.floor(h / group) * headDim;
    const weights = new Float32Array(position + 1);
    const scores = new Float64Array(position + 1);
    let max = -Infinity;
    for (let j = first; j <= position; j++) {
      let dot = 0;
      for (let d = 0; d < headDim; d++) dot += q[qBase + d]! * keys[j * cache.kvDim + kvHead + d]!;
      let score = dot * attentionScale;
      if (attentionSoftcap > 0) score = attentionSoftcap * Math.tanh(score / attentionSoftcap);
      scores[j] = score;
      if (score > max) max = score;
    }
    let total = 0;
    for (let j = first; j <= position; j++) total += scores[j] = Math.exp(scores[j]! - max);
    for (let j = first; j <= position; j++) weights[j] = scores[j]! / total;
    return weights;
  });
}
