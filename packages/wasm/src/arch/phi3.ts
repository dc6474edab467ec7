/**
 * Phi-3 / Phi-4-mini: the llama block with the q, k, v projections fused into
 * one matrix (rows q | k | v) and gate and up fused into one (rows gate | up),
 * rotate_half RoPE (optionally over part of each head), sliding window on every layer.
 */
import type { WeightMatrix } from "../kernels/types.js";
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import { columns, linear, norm, selfAttention, type ForwardContext } from "../engine/layers.js";
import type { WeightSource } from "../engine/weights.js";
import { addInPlace, gatedActivation } from "../kernels/ops.js";
import type { Architecture } from "./types.js";
import { globalRope, hfTensorName, HF_LAYER_NAMES, loadEmbeddingAndOutput, readBaseConfig } from "./common.js";

// ---- config ----------------------------------------------------------------

export function readPhi3Config(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "phi3");
  config.ropeMode = "neox";
  const window = r.optionalNumber("sliding_window", "attention.sliding_window") ?? 0;
  config.layerWindows.fill(window);
  return config;
}

// ---- weights -----------------------------------------------------------------

interface Phi3Layer {
  attnNorm: Float32Array; // [hidden]
  qkv: WeightMatrix; // [(numHeads + 2 * numKVHeads) * headDim, hidden]
  o: WeightMatrix; // [hidden, numHeads * headDim]
  ffnNorm: Float32Array; // [hidden]
  gateUp: WeightMatrix; // [2 * ffn, hidden]: gate rows then up rows
  down: WeightMatrix; // [hidden, ffn]
}

const PHI3_HF_LAYER_NAMES: Readonly<Record<string, string>> = {
  ...HF_LAYER_NAMES,
  ffn_up: "mlp.gate_up_proj",
};

function loadLayer(source: WeightSource, config: ModelConfig, i: number): Phi3Layer {
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, ffnSize } = config;
  const name = (part: string) => `blk.${i}.${part}.weight`;
  return {
    attnNorm: source.vector(name("attn_norm"), hidden),
    qkv: source.matrix(name("attn_qkv"), (numHeads + 2 * numKVHeads) * headDim, hidden),
    o: source.matrix(name("attn_output"), hidden, numHeads * headDim),
    ffnNorm: source.vector(name("ffn_norm"), hidden),
    gateUp: source.matrix(name("ffn_up"), 2 * ffnSize, hidden),
    down: source.matrix(name("ffn_down"), hidden, ffnSize),
  };
}

// ---- attention ---------------------------------------------------------------

function attention(ctx: ForwardContext, index: number, layer: Phi3Layer, h: Float32Array, rope: Float64Array): Float32Array {
  const { numHeads, numKVHeads, headDim } = ctx.config;
  const qDim = numHeads * headDim;
  const kvDim = numKVHeads * headDim;
  const total = qDim + 2 * kvDim;
  const qkv = linear(ctx, layer.qkv, h); // [tokens, qDim + 2 * kvDim]
  const q = columns(ctx, qkv, total, 0, qDim);
  const k = columns(ctx, qkv, total, qDim, kvDim);
  const v = columns(ctx, qkv, total, qDim + kvDim, kvDim);
  const attended = selfAttention(ctx, index, q, k, v, { inverseFrequencies: rope, window: ctx.config.layerWindows[index]! });
  return linear(ctx, layer.o, attended);
}

// ---- MLP ---------------------------------------------------------------------

function mlp(ctx: ForwardContext, layer: Phi3Layer, h: Float32Array): Float32Array {
  const ffn = ctx.config.ffnSize;
  const gateUp = linear(ctx, layer.gateUp, h); // [tokens, 2 * ffn]
  const gate = columns(ctx, gateUp, 2 * ffn, 0, ffn);
  const up = columns(ctx, gateUp, 2 * ffn, ffn, ffn);
  gatedActivation(gate, gate, up, gate.length, ctx.config.activation);
  return linear(ctx, layer.down, gate);
}

// ---- block -------------------------------------------------------------------

function block(ctx: ForwardContext, index: number, layer: Phi3Layer, x: Float32Array, rope: Float64Array): void {
  addInPlace(x, attention(ctx, index, layer, norm(ctx, x, layer.attnNorm), rope));
  addInPlace(x, mlp(ctx, layer, norm(ctx, x, layer.ffnNorm)));
}

// ---- model -------------------------------------------------------------------

export const phi3: Architecture = {
  id: "phi3",
  ggufNames: ["phi3"],
  hfNames: ["phi3", "Phi3ForCausalLM"],
  readConfig: readPhi3Config,
  hfTensorName: (name) => hfTensorName(name, PHI3_HF_LAYER_NAMES),
  load(source, config) {
    const head = loadEmbeddingAndOutput(source, config);
    const layers = Array.from({ length: config.numLayers }, (_, i) => loadLayer(source, config, i));
    const rope = globalRope(source, config);
    return {
      ...head,
      runLayers(ctx, x) {
        layers.forEach((layer, i) => block(ctx, i, layer, x, rope));
      },
    };
  },
};
