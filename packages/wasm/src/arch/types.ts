/** What each architecture module provides to the engine. */
import type { WeightMatrix } from "../kernels/types.js";
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import type { ForwardContext } from "../engine/layers.js";
import type { WeightSource } from "../engine/weights.js";

/** An architecture's weights, loaded and ready to run. */
export interface LoadedModel {
  /** [vocabSize, hiddenSize] */
  embedding: WeightMatrix;
  /** [hiddenSize] */
  outputNorm: Float32Array;
  /** [vocabSize, hiddenSize]; the embedding itself when tied. */
  output: WeightMatrix;
  /** Runs every decoder block over x [tokens, hiddenSize] in place. */
  runLayers(ctx: ForwardContext, x: Float32Array): void;
}

export interface Architecture {
  /** Canonical id (ModelConfig.architecture). */
  id: string;
  /** GGUF general.architecture values. */
  ggufNames: readonly string[];
  /** Hugging Face model_type values and architectures[0] class names. */
  hfNames: readonly string[];
  readConfig(reader: ConfigReader): ModelConfig;
  /** The Hugging Face name of a GGUF-style tensor name ("blk.0.attn_q.weight" → "model.layers.0.self_attn.q_proj.weight"). */
  hfTensorName(name: string): string;
  load(source: WeightSource, config: ModelConfig): LoadedModel;
}
