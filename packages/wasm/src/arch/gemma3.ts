/**
 * Gemma 3 (text): embeddings scaled by sqrt(hidden), RMSNorm with (1 + w),
 * norms before and after both attention and MLP, per-head q/k norms, a
 * GELU-tanh gated MLP, and sliding-window layers with their own RoPE base
 * (every sliding_window_pattern-th layer is global).
 */
import type { WeightMatrix } from "../kernels/types.js";
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import { gatedMlp, linear, norm, normHeads, projections, residual, selfAttention, type ForwardContext } from "../engine/layers.js";
import { ropeInverseFrequencies } from "../engine/rope.js";
import type { WeightSource } from "../engine/weights.js";
import type { Architecture } from "./types.js";
import { globalRope, hfTensorName, HF_LAYER_NAMES, loadEmbeddingAndOutput, readBaseConfig } from "./common.js";

// ---- config ----------------------------------------------------------------

/** llama.cpp hard-codes these for gemma3; transformers has them as config defaults. */
const DEFAULT_SLIDING_WINDOW_PATTERN = 6;
const DEFAULT_LOCAL_ROPE_BASE = 10000;

export function readGemma3Config(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "gemma3");
  config.ropeMode = "neox";
  config.activation = "gelu_tanh";
  config.embeddingScale = Math.fround(Math.sqrt(config.hiddenSize));
  // llama.cpp's converter stores Gemma norm weights with the 1 already added.
  config.normUnitOffset = r.format === "gguf" ? 0 : 1;
  config.tiedEmbeddings = r.format === "gguf" ? false : r.raw("tie_word_embeddings", undefined) !== false;
  config.ropeLocalTheta = r.number("rope_local_base_freq", undefined, DEFAULT_LOCAL_ROPE_BASE);
  config.finalLogitSoftcap = r.optionalNumber("final_logit_softcapping", "final_logit_softcapping") ?? 0;
  config.attentionSoftcap = r.optionalNumber("attn_logit_softcapping", "attn_logit_softcapping") ?? 0;

  // GGUF has no query_pre_attn_scalar: llama.cpp uses head_dim, except hidden/heads for the 62-layer 27B.
  const ggufScalar =
    config.numLayers === 62 ? config.hiddenSize / config.numHeads : config.headDim;
  const scalar = r.format === "gguf" ? ggufScalar : r.number("query_pre_attn_scalar", undefined, config.headDim);
  config.attentionScale = 1 / Math.sqrt(scalar);

  const window = r.positiveInt("sliding_window", "attention.sliding_window");
  const layerTypes = r.raw("layer_types", undefined);
  if (Array.isArray(layerTypes) && layerTypes.length === config.numLayers) {
    config.layerWindows = layerTypes.map((type) => (type === "sliding_attention" ? window : 0));
  } else {
    const pattern = r.positiveInt("sliding_window_pattern", undefined, DEFAULT_SLIDING_WINDOW_PATTERN);
    config.layerWindows = config.layerWindows.map((_, i) => ((i + 1) % pattern === 0 ? 0 : window));
  }
  return config;
}

// ---- weights -----------------------------------------------------------------

interface Gemma3Layer {
  attnNorm: Float32Array; // [hidden]
  q: WeightMatrix; // [numHeads * headDim, hidden]
  k: WeightMatrix; // [numKVHeads * headDim, hidden]
  v: WeightMatrix; // [numKVHeads * headDim, hidden]
  o: WeightMatrix; // [hidden, numHeads * headDim]
  qNorm: Float32Array; // [headDim]
  kNorm: Float32Array; // [headDim]
  postAttentionNorm: Float32Array; // [hidden]
  preFfnNorm: Float32Array; // [hidden]
  gate: WeightMatrix; // [ffn, hidden]
  up: WeightMatrix; // [ffn, hidden]
  down: WeightMatrix; // [hidden, ffn]
  postFfnNorm: Float32Array; // [hidden]
}

const GEMMA3_HF_LAYER_NAMES: Readonly<Record<string, string>> = {
  ...HF_LAYER_NAMES,
  post_attention_norm: "post_attention_layernorm",
  ffn_norm: "pre_feedforward_layernorm",
  post_ffw_norm: "post_feedforward_layernorm",
};

function loadLayer(source: WeightSource, config: ModelConfig, i: number): Gemma3Layer {
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, ffnSize } = config;
  const name = (part: string) => `blk.${i}.${part}.weight`;
  return {
    attnNorm: source.vector(name("attn_norm"), hidden),
    q: source.matrix(name("attn_q"), numHeads * headDim, hidden),
    k: source.matrix(name("attn_k"), numKVHeads * headDim, hidden),
    v: source.matrix(name("attn_v"), numKVHeads * headDim, hidden),
    o: source.matrix(name("attn_output"), hidden, numHeads * headDim),
    qNorm: source.vector(name("attn_q_norm"), headDim),
    kNorm: source.vector(name("attn_k_norm"), headDim),
    postAttentionNorm: source.vector(name("post_attention_norm"), hidden),
    preFfnNorm: source.vector(name("ffn_norm"), hidden),
    gate: source.matrix(name("ffn_gate"), ffnSize, hidden),
    up: source.matrix(name("ffn_up"), ffnSize, hidden),
    down: source.matrix(name("ffn_down"), hidden, ffnSize),
    postFfnNorm: source.vector(name("post_ffw_norm"), hidden),
  };
}

// ---- attention ---------------------------------------------------------------

function attention(
  ctx: ForwardContext,
  index: number,
  layer: Gemma3Layer,
  h: Float32Array,
  inverseFrequencies: Float64Array,
): Float32Array {
  const [q, k, v] = projections(ctx, [layer.q, layer.k, layer.v], h) as [Float32Array, Float32Array, Float32Array];
  normHeads(ctx, q, layer.qNorm, ctx.config.numHeads);
  normHeads(ctx, k, layer.kNorm, ctx.config.numKVHeads);
  const attended = selfAttention(ctx, index, q, k, v, { inverseFrequencies, window: ctx.config.layerWindows[index]! });
  return linear(ctx, layer.o, attended);
}

// ---- MLP ---------------------------------------------------------------------

function mlp(ctx: ForwardContext, layer: Gemma3Layer, h: Float32Array): Float32Array {
  return gatedMlp(ctx, h, layer.gate, layer.up, layer.down, "gelu_tanh");
}

// ---- block -------------------------------------------------------------------

/** x += postNorm(attention(norm(x))); x += postNorm(mlp(preNorm(x))). */
function block(ctx: ForwardContext, index: number, layer: Gemma3Layer, x: Float32Array, rope: Float64Array): void {
  const attended = attention(ctx, index, layer, norm(ctx, x, layer.attnNorm), rope);
  residual(ctx, x, norm(ctx, attended, layer.postAttentionNorm));
  const transformed = mlp(ctx, layer, norm(ctx, x, layer.preFfnNorm));
  residual(ctx, x, norm(ctx, transformed, layer.postFfnNorm));
}

// ---- model -------------------------------------------------------------------

export const gemma3: Architecture = {
  id: "gemma3",
  ggufNames: ["gemma3"],
  hfNames: ["gemma3", "gemma3_text", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"],
  readConfig: readGemma3Config,
  hfTensorName: (name) => hfTensorName(name, GEMMA3_HF_LAYER_NAMES),
  load(source, config) {
    const head = loadEmbeddingAndOutput(source, config);
    const layers = Array.from({ length: config.numLayers }, (_, i) => loadLayer(source, config, i));
    const globalFrequencies = globalRope(source, config);
    const localFrequencies = ropeInverseFrequencies(config.rotaryDim, config.ropeLocalTheta, { type: "none" });
    const frequencies = layers.map((_, i) => (config.layerWindows[i]! > 0 ? localFrequencies : globalFrequencies));
    return {
      ...head,
      runLayers(ctx, x) {
        layers.forEach((layer, i) => block(ctx, i, layer, x, frequencies[i]!));
      },
      // The same matrices (LoRA deltas find them by identity), the pre-MLP norm under the family's name.
      trainable: { blocks: layers.map((layer) => ({ ...layer, ffnNorm: layer.preFfnNorm })), ropeFrequencies: frequencies },
    };
  },
};
