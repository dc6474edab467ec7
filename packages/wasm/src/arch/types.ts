/** What each architecture module provides to the loader. */
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import type { LoadedModel } from "../engine/transformer.js";
import type { WeightSource } from "../engine/weights.js";

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
