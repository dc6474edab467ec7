/**
 * The weights of one llama-family decoder block (llama, qwen2, qwen3), named
 * here so the forward (arch/llama.ts) and training (train/) read the same ones.
 */
import type { WeightMatrix } from "../kernels/types.js";

/** One decoder block of the llama family. Optional parts are used by variants (biases, q/k norms). */
export interface LlamaBlockWeights {
  attnNorm: Float32Array; // [hidden]
  q: WeightMatrix; // [numHeads * headDim, hidden]
  k: WeightMatrix; // [numKVHeads * headDim, hidden]
  v: WeightMatrix; // [numKVHeads * headDim, hidden]
  o: WeightMatrix; // [hidden, numHeads * headDim]
  qBias?: Float32Array; // [numHeads * headDim]
  kBias?: Float32Array; // [numKVHeads * headDim]
  vBias?: Float32Array; // [numKVHeads * headDim]
  oBias?: Float32Array; // [hidden]
  qNorm?: Float32Array; // [headDim]
  kNorm?: Float32Array; // [headDim]
  ffnNorm: Float32Array; // [hidden]
  gate: WeightMatrix; // [ffn, hidden]
  up: WeightMatrix; // [ffn, hidden]
  down: WeightMatrix; // [hidden, ffn]
}

/** What training needs of a loaded model beyond its head: the blocks and their RoPE frequencies. */
export interface TrainableBlocks {
  blocks: readonly LlamaBlockWeights[];
  /** Inverse RoPE frequencies of every block, [rotaryDim / 2]. */
  inverseFrequencies: Float64Array;
}
