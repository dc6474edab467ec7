/**
 * Phi-3 / Phi-4-mini: the llama block with the q, k, v projections fused into
 * one matrix (rows q | k | v) and gate and up fused into one (rows gate | up),
 * rotate_half RoPE (optionally over part of each head, optionally LongRoPE-scaled),
 * sliding window on every layer.
 */
import { InferenceError } from "@infer/core";
import type { WeightMatrix } from "../kernels/types.js";
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import { columns, linear, norm, residual, selfAttention, type ForwardContext } from "../engine/layers.js";
import type { WeightSource } from "../engine/weights.js";
import { ropeInverseFrequencies } from "../engine/rope.js";
import { gatedActivation } from "../kernels/ops.js";
import type { Architecture } from "./types.js";
import { globalRope, hfTensorName, readSlidingWindow, HF_LAYER_NAMES, loadEmbeddingAndOutput, readBaseConfig } from "./common.js";

// ---- config ----------------------------------------------------------------

export function readPhi3Config(r: ConfigReader): ModelConfig {
  const config = readBaseConfig(r, "phi3");
  config.ropeMode = "neox";
  const window = readSlidingWindow(r);
  config.layerWindows.fill(window);
  // llama.cpp's converter writes LongRoPE as these keys plus rope_factors_short/long.weight tensors.
  const attentionFactor = r.optionalNumber(undefined, "rope.scaling.attn_factor");
  if (r.format === "gguf" && attentionFactor !== undefined) {
    config.ropeScaling = {
      type: "longrope",
      originalContextLength: r.positiveInt(undefined, "rope.scaling.original_context_length", config.contextLength),
      attentionFactor,
    };
  }
  return config;
}

/** RoPE of one forward call: LongRoPE switches factors by the context the cache holds. */
interface RopeChoice {
  inverseFrequencies: Float64Array;
  magnitude: number;
}

function loadRope(source: WeightSource, config: ModelConfig): (contextLength: number) => RopeChoice {
  const scaling = config.ropeScaling;
  const pairs = config.rotaryDim / 2;
  const hasFactorTensors = source.has("rope_factors_short.weight") && source.has("rope_factors_long.weight");
  if (scaling.type !== "longrope" && !hasFactorTensors) {
    const plain = { inverseFrequencies: globalRope(source, config), magnitude: 1 };
    return () => plain;
  }
  const longrope =
    scaling.type === "longrope" ? scaling : { originalContextLength: config.contextLength, attentionFactor: 1, shortFactors: undefined, longFactors: undefined };
  const factors = (list: number[] | undefined, tensor: string): Float32Array => {
    if (!list) return source.vector(tensor, pairs, false);
    if (list.length !== pairs) {
      throw new InferenceError("MODEL_FORMAT", `${source.file}: rope_scaling has ${list.length} factors, expected ${pairs}`, {
        details: { file: source.file, field: "rope_scaling" },
      });
    }
    return Float32Array.from(list);
  };
  const table = (list: number[] | undefined, tensor: string): RopeChoice => ({
    inverseFrequencies: ropeInverseFrequencies(config.rotaryDim, config.ropeTheta, { type: "none" }, factors(list, tensor)),
    magnitude: longrope.attentionFactor,
  });
  const short = table(longrope.shortFactors, "rope_factors_short.weight");
  const long = table(longrope.longFactors, "rope_factors_long.weight");
  return (contextLength) => (contextLength > longrope.originalContextLength ? long : short);
}

// ---- weights -----------------------------------------------------------------

interface Phi3Layer {
  attnNorm: Float32Array; // [hidden]
  /** Fused [(numHeads + 2 * numKVHeads) * headDim, hidden], or separate q, k, v. */
  qkv: WeightMatrix | [q: WeightMatrix, k: WeightMatrix, v: WeightMatrix];
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
  // Some GGUF conversions store q, k and v apart.
  const qkv: Phi3Layer["qkv"] = source.has(name("attn_qkv"))
    ? source.matrix(name("attn_qkv"), (numHeads + 2 * numKVHeads) * headDim, hidden)
    : [
        source.matrix(name("attn_q"), numHeads * headDim, hidden),
        source.matrix(name("attn_k"), numKVHeads * headDim, hidden),
        source.matrix(name("attn_v"), numKVHeads * headDim, hidden),
      ];
  return {
    attnNorm: source.vector(name("attn_norm"), hidden),
    qkv,
    o: source.matrix(name("attn_output"), hidden, numHeads * headDim),
    ffnNorm: source.vector(name("ffn_norm"), hidden),
    gateUp: source.matrix(name("ffn_up"), 2 * ffnSize, hidden),
    down: source.matrix(name("ffn_down"), hidden, ffnSize),
  };
}

// ---- attention ---------------------------------------------------------------

function attention(ctx: ForwardContext, index: number, layer: Phi3Layer, h: Float32Array, rope: RopeChoice): Float32Array {
  const { numHeads, numKVHeads, headDim } = ctx.config;
  const qDim = numHeads * headDim;
  const kvDim = numKVHeads * headDim;
  let q: Float32Array, k: Float32Array, v: Float32Array;
  if (Array.isArray(layer.qkv)) {
    [q, k, v] = layer.qkv.map((w) => linear(ctx, w, h)) as [Float32Array, Float32Array, Float32Array];
  } else {
    const total = qDim + 2 * kvDim;
    const qkv = linear(ctx, layer.qkv, h); // [tokens, qDim + 2 * kvDim]
    q = columns(ctx, qkv, total, 0, qDim);
    k = columns(ctx, qkv, total, qDim, kvDim);
    v = columns(ctx, qkv, total, qDim + kvDim, kvDim);
  }
  const attended = selfAttention(ctx, index, q, k, v, {
    inverseFrequencies: rope.inverseFrequencies,
    ropeMagnitude: rope.magnitude,
    window: ctx.config.layerWindows[index]!,
  });
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

function block(ctx: ForwardContext, index: number, layer: Phi3Layer, x: Float32Array, rope: RopeChoice): void {
  residual(ctx, x, attention(ctx, index, layer, norm(ctx, x, layer.attnNorm), rope));
  residual(ctx, x, mlp(ctx, layer, norm(ctx, x, layer.ffnNorm)));
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
    const ropeFor = loadRope(source, config);
    return {
      ...head,
      runLayers(ctx, x) {
        const rope = ropeFor(ctx.cache.contextLength);
        layers.forEach((layer, i) => block(ctx, i, layer, x, rope));
      },
    };
  },
};
