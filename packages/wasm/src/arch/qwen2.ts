/** Qwen2 / Qwen2.5: the llama block with biases on the q, k and v projections and rotate_half RoPE. */
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import type { Architecture } from "./types.js";
import { hfTensorName, readBaseConfig } from "./common.js";
import { loadLlamaFamily } from "./llama.js";

// ---- config ----------------------------------------------------------------

export function readQwen2Config(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "qwen2");
  config.ropeMode = "neox";
  // Qwen2 configs carry sliding_window but only use it when use_sliding_window is set,
  // and then only in layers from max_window_layers on.
  if (r.raw("use_sliding_window", undefined) === true) {
    const window = r.positiveInt("sliding_window", undefined);
    const from = r.number("max_window_layers", undefined, 0);
    config.layerWindows = config.layerWindows.map((_, i) => (i >= from ? window : 0));
  }
  return config;
}

// ---- attention, MLP, block, model: llama's, with the q/k/v biases required ----

export const qwen2: Architecture = {
  id: "qwen2",
  ggufNames: ["qwen2"],
  hfNames: ["qwen2", "Qwen2ForCausalLM"],
  readConfig: readQwen2Config,
  hfTensorName: (name) => hfTensorName(name),
  load: (source, config) => loadLlamaFamily(source, config, { biases: true }),
};
