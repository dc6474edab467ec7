/**
 * Llama (2, 3, 3.1, 3.2), TinyLlama, SmolLM/SmolLM2 and Mistral: pre-norm
 * blocks of grouped-query attention with RoPE and a SiLU-gated MLP.
 */
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import { gatedMlp, linear, norm, normHeads, projections, residual, selfAttention, type ForwardContext } from "../engine/layers.js";
import type { WeightSource } from "../engine/weights.js";
import type { LoadedModel } from "../engine/transformer.js";
import type { LlamaBlockWeights } from "../engine/block-weights.js";
import type { Architecture } from "./types.js";
import { globalRope, hfTensorName, readSlidingWindow, loadEmbeddingAndOutput, readBaseConfig } from "./common.js";

// ---- config ----------------------------------------------------------------

export function readLlamaConfig(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "llama");
  // llama.cpp's converter permutes q/k rows so GGUF llama rotates adjacent pairs;
  // Hugging Face checkpoints keep rotate_half order.
  config.ropeMode = r.format === "gguf" ? "normal" : "neox";
  // Mistral's sliding window (null or absent for Llama and later Mistral releases).
  const window = readSlidingWindow(r);
  config.layerWindows.fill(window);
  return config;
}

// ---- weights -----------------------------------------------------------------

/** One decoder block of the llama family (its weights are named in engine/, where training reads them too). */
export type LlamaLayer = LlamaBlockWeights;

/** Loads block i; `required` names the optional parts this variant must have. */
export function loadLlamaLayer(
  source: WeightSource,
  config: ModelConfig,
  i: number,
  required: { biases?: boolean; qkNorm?: boolean } = {},
): LlamaLayer {
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, ffnSize } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKVHeads * headDim;
  const name = (part: string, kind = "weight") => `blk.${i}.${part}.${kind}`;
  const vector = (part: string, length: number, needed: boolean) =>
    needed ? source.vector(part, length) : source.optionalVector(part, length);
  return {
    attnNorm: source.vector(name("attn_norm"), hidden),
    q: source.matrix(name("attn_q"), qDim, hidden),
    k: source.matrix(name("attn_k"), kvDim, hidden),
    v: source.matrix(name("attn_v"), kvDim, hidden),
    o: source.matrix(name("attn_output"), hidden, qDim),
    qBias: vector(name("attn_q", "bias"), qDim, required.biases === true),
    kBias: vector(name("attn_k", "bias"), kvDim, required.biases === true),
    vBias: vector(name("attn_v", "bias"), kvDim, required.biases === true),
    oBias: source.optionalVector(name("attn_output", "bias"), hidden),
    qNorm: vector(name("attn_q_norm"), headDim, required.qkNorm === true),
    kNorm: vector(name("attn_k_norm"), headDim, required.qkNorm === true),
    ffnNorm: source.vector(name("ffn_norm"), hidden),
    gate: source.matrix(name("ffn_gate"), ffnSize, hidden),
    up: source.matrix(name("ffn_up"), ffnSize, hidden),
    down: source.matrix(name("ffn_down"), hidden, ffnSize),
  };
}

// ---- attention ---------------------------------------------------------------

/** Projections (+ biases), per-head q/k norms when present, RoPE, cached attention, output projection. */
export function llamaAttention(
  ctx: ForwardContext,
  index: number,
  layer: LlamaLayer,
  h: Float32Array,
  inverseFrequencies: Float64Array,
): Float32Array {
  // One kernel call for the three projections: the input is prepared and the threads woken once.
  const [q, k, v] = projections(ctx, [layer.q, layer.k, layer.v], h, [layer.qBias, layer.kBias, layer.vBias]) as [
    Float32Array,
    Float32Array,
    Float32Array,
  ];
  if (layer.qNorm) normHeads(ctx, q, layer.qNorm, ctx.config.numHeads);
  if (layer.kNorm) normHeads(ctx, k, layer.kNorm, ctx.config.numKVHeads);
  const attended = selfAttention(ctx, index, q, k, v, { inverseFrequencies, window: ctx.config.layerWindows[index]! });
  return linear(ctx, layer.o, attended, layer.oBias);
}

// ---- MLP ---------------------------------------------------------------------

export function llamaMlp(ctx: ForwardContext, layer: LlamaLayer, h: Float32Array): Float32Array {
  return gatedMlp(ctx, h, layer.gate, layer.up, layer.down, ctx.config.activation);
}

// ---- block -------------------------------------------------------------------

/** x += attention(norm(x)); x += mlp(norm(x)). */
export function llamaBlock(
  ctx: ForwardContext,
  index: number,
  layer: LlamaLayer,
  x: Float32Array,
  inverseFrequencies: Float64Array,
): void {
  residual(ctx, x, llamaAttention(ctx, index, layer, norm(ctx, x, layer.attnNorm), inverseFrequencies));
  residual(ctx, x, llamaMlp(ctx, layer, norm(ctx, x, layer.ffnNorm)));
}

// ---- model -------------------------------------------------------------------

/** Loads a llama-family model whose blocks differ only in which optional parts they require. */
export function loadLlamaFamily(
  source: WeightSource,
  config: ModelConfig,
  required: { biases?: boolean; qkNorm?: boolean } = {},
): LoadedModel {
  const head = loadEmbeddingAndOutput(source, config);
  const layers = Array.from({ length: config.numLayers }, (_, i) => loadLlamaLayer(source, config, i, required));
  const rope = globalRope(source, config);
  return {
    ...head,
    runLayers(ctx, x) {
      layers.forEach((layer, i) => llamaBlock(ctx, i, layer, x, rope));
    },
    trainable: { blocks: layers, ropeFrequencies: layers.map(() => rope) },
  };
}

export const llama: Architecture = {
  id: "llama",
  ggufNames: ["llama"],
  hfNames: ["llama", "mistral", "LlamaForCausalLM", "MistralForCausalLM"],
  readConfig: readLlamaConfig,
  hfTensorName: (name) => hfTensorName(name),
  load: (source, config) => loadLlamaFamily(source, config),
};
