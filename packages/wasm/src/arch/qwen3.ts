/** Qwen3 (dense): the llama block with per-head RMSNorm on q and k before RoPE, explicit head_dim, no biases. */
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import type { Architecture } from "./types.js";
import { hfTensorName, readBaseConfig } from "./common.js";
import { loadLlamaFamily } from "./llama.js";

// ---- config ----------------------------------------------------------------

export function readQwen3Config(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "qwen3");
  config.ropeMode = "neox";
  return config;
}

// ---- attention (q/k norms), MLP, block, model: llama's with q/k norms required ----

export const qwen3: Architecture = {
  id: "qwen3",
  ggufNames: ["qwen3"],
  hfNames: ["qwen3", "Qwen3ForCausalLM"],
  readConfig: readQwen3Config,
  hfTensorName: (name) => hfTensorName(name),
  load: (source, config) => loadLlamaFamily(source, config, { qkNorm: true }),
};
