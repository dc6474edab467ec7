/**
 * The weights of one llama-family decoder block (llama, qwen2, qwen3; Gemma 3
 * with its post-norms), named here so the forward (arch/) and training
 * (train/) read the same ones.
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
  /** Gemma 3: a norm of the attention's output before the residual add. */
  postAttentionNorm?: Float32Array; // [hidden]
  ffnNorm: Float32Array; // [hidden]
  gate: WeightMatrix; // [ffn, hidden]
  up: WeightMatrix; // [ffn, hidden]
  down: WeightMatrix; // [hidden, ffn]
  /** Gemma 3: a norm of the MLP's output before the residual add. */
  postFfnNorm?: Float32Array; // [hidden]
}

/** What training needs of a loaded model beyond its head: the blocks and their RoPE frequencies. */
export interface TrainableBlocks {
  blocks: readonly LlamaBlockWeights[];
  /** Per block, its inverse RoPE frequencies, [rotaryDim / 2] (Gemma 3's sliding layers have their own). */
  ropeFrequencies: readonly Float64Array[];
}
