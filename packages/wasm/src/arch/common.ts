/** Configuration fields and tensor names the llama-family architectures share. */
import { InferenceError } from "@infer/core";
import type { WeightMatrix } from "../kernels/types.js";
import type { ConfigReader, ModelConfig } from "../engine/config.js";
import type { RopeScaling } from "../engine/rope.js";
import { ropeInverseFrequencies } from "../engine/rope.js";
import type { WeightSource } from "../engine/weights.js";

/** More blocks than any real decoder has; a larger count is a corrupt header. */
const MAX_LAYERS = 4096;

/**
 * The fields every architecture reads the same way, with the llama defaults
 * (SiLU, plain RMSNorm, 1/sqrt(headDim) scale, no windows); each architecture
 * overrides what differs.
 */
export function readBaseConfig(r: ConfigReader, architecture: string): ModelConfig {
  const hiddenSize = r.positiveInt("hidden_size", "embedding_length");
  const numHeads = r.positiveInt("num_attention_heads", "attention.head_count");
  const numKVHeads = r.positiveInt("num_key_value_heads", "attention.head_count_kv", numHeads);
  const headDim = r.positiveInt("head_dim", "attention.key_length", Math.floor(hiddenSize / numHeads));
  // Per-layer tables are allocated from this before tensors are checked: keep it sane.
  const numLayers = r.positiveInt("num_hidden_layers", "block_count", undefined, MAX_LAYERS);
  if (numHeads % numKVHeads !== 0) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `${r.file}: ${numHeads} attention heads are not a multiple of ${numKVHeads} KV heads`,
      { details: { file: r.file } },
    );
  }
  const partialRotary = r.optionalNumber("partial_rotary_factor", undefined);
  const rotaryDim = r.positiveInt(
    undefined,
    "rope.dimension_count",
    partialRotary === undefined ? headDim : Math.floor(headDim * partialRotary),
  );
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) {
    throw new InferenceError("MODEL_FORMAT", `${r.file}: rotary dims ${rotaryDim} must be even and at most ${headDim}`);
  }
  const ropeTheta = r.number("rope_theta", "rope.freq_base", 10000);
  return {
    architecture,
    vocabSize: r.positiveInt("vocab_size", "vocab_size", r.vocabFallback),
    hiddenSize,
    numLayers,
    numHeads,
    numKVHeads,
    headDim,
    ffnSize: r.positiveInt("intermediate_size", "feed_forward_length"),
    contextLength: r.positiveInt("max_position_embeddings", "context_length"),
    ropeTheta,
    // transformers' own default where config.json leaves it out; GGUF always states it.
    rmsEps: r.number("rms_norm_eps", "attention.layer_norm_rms_epsilon", r.format === "gguf" ? undefined : 1e-6),
    ropeMode: "neox",
    rotaryDim,
    ropeScaling: readRopeScaling(r),
    ropeLocalTheta: ropeTheta,
    layerWindows: new Array<number>(numLayers).fill(0),
    attentionScale: 1 / Math.sqrt(headDim),
    embeddingScale: 1,
    normUnitOffset: 0,
    activation: "silu",
    finalLogitSoftcap: 0,
    attentionSoftcap: 0,
    tiedEmbeddings: r.format === "gguf" ? false : r.raw("tie_word_embeddings", undefined) === true,
  };
}

/** An optional attention window (HF sliding_window; GGUF attention.sliding_window): 0 when absent or null. */
export function readSlidingWindow(r: ConfigReader): number {
  return r.raw("sliding_window", "attention.sliding_window") === undefined
    ? 0
    : r.positiveInt("sliding_window", "attention.sliding_window");
}

/** HF rope_scaling {rope_type | type, factor, ...} or GGUF rope.scaling.type / rope.scaling.factor. */
export function readRopeScaling(r: ConfigReader): RopeScaling {
  if (r.format === "gguf") {
    const type = r.raw(undefined, "rope.scaling.type");
    if (type === undefined || type === "none") return { type: "none" };
    if (type === "linear") {
      const factor = r.number(undefined, "rope.scaling.factor");
      return factor === 1 ? { type: "none" } : { type: "linear", factor };
    }
    throw unsupportedScaling(r, String(type));
  }
  const scaling = r.raw("rope_scaling", undefined);
  if (scaling === undefined) return { type: "none" };
  if (typeof scaling !== "object") {
    throw new InferenceError("MODEL_FORMAT", `${r.file}: rope_scaling must be an object`, { details: { file: r.file } });
  }
  const fields = scaling as Record<string, unknown>;
  const type = String(fields.rope_type ?? fields.type ?? "default");
  const numberField = (key: string): number => {
    const value = fields[key];
    if (typeof value !== "number") throw r.missing(`rope_scaling.${key}`, undefined);
    return value;
  };
  switch (type) {
    case "default":
      return { type: "none" };
    case "longrope":
    case "su": {
      const factorList = (key: string): number[] => {
        const value = fields[key];
        if (!Array.isArray(value) || !value.every((v) => typeof v === "number")) throw r.missing(`rope_scaling.${key}`, undefined);
        return value as number[];
      };
      const contextLength = r.positiveInt("max_position_embeddings", undefined);
      const original = r.positiveInt("original_max_position_embeddings", undefined, contextLength);
      const factor = contextLength / original;
      const stated = fields.attention_factor;
      return {
        type: "longrope",
        shortFactors: factorList("short_factor"),
        longFactors: factorList("long_factor"),
        originalContextLength: original,
        attentionFactor:
          typeof stated === "number" ? stated : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original)),
      };
    }
    case "linear":
      return { type: "linear", factor: numberField("factor") };
    case "llama3":
      return {
        type: "llama3",
        factor: numberField("factor"),
        lowFreqFactor: numberField("low_freq_factor"),
        highFreqFactor: numberField("high_freq_factor"),
        originalContextLength: numberField("original_max_position_embeddings"),
      };
    default:
      throw unsupportedScaling(r, type);
  }
}

function unsupportedScaling(r: ConfigReader, type: string): InferenceError {
  return new InferenceError("UNSUPPORTED", `${r.file}: RoPE scaling "${type}" is not supported (none, linear, llama3, longrope are)`, {
    details: { file: r.file, ropeScaling: type },
  });
}

/** GGUF block tensor names and their Hugging Face module paths inside model.layers.N. */
export const HF_LAYER_NAMES: Readonly<Record<string, string>> = {
  attn_norm: "input_layernorm",
  attn_q: "self_attn.q_proj",
  attn_k: "self_attn.k_proj",
  attn_v: "self_attn.v_proj",
  attn_output: "self_attn.o_proj",
  attn_q_norm: "self_attn.q_norm",
  attn_k_norm: "self_attn.k_norm",
  attn_qkv: "self_attn.qkv_proj",
  ffn_norm: "post_attention_layernorm",
  ffn_gate: "mlp.gate_proj",
  ffn_up: "mlp.up_proj",
  ffn_down: "mlp.down_proj",
};

const HF_GLOBAL_NAMES: Readonly<Record<string, string>> = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
};

/** Translates a GGUF-style tensor name with the given block-name table; unknown names pass through. */
export function hfTensorName(name: string, layerNames: Readonly<Record<string, string>> = HF_LAYER_NAMES): string {
  const global = HF_GLOBAL_NAMES[name];
  if (global) return global;
  const match = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(name);
  const module = match ? layerNames[match[2]!] : undefined;
  return match && module ? `model.layers.${match[1]}.${module}.${match[3]}` : name;
}

/** Token embedding, final norm and output projection (tied when the file has no output.weight). */
export function loadEmbeddingAndOutput(
  source: WeightSource,
  config: ModelConfig,
): { embedding: WeightMatrix; outputNorm: Float32Array; output: WeightMatrix } {
  const { vocabSize, hiddenSize } = config;
  const embedding = source.matrix("token_embd.weight", vocabSize, hiddenSize);
  const outputNorm = source.vector("output_norm.weight", hiddenSize);
  let output: WeightMatrix;
  if (source.has("output.weight")) output = source.matrix("output.weight", vocabSize, hiddenSize);
  else if (config.tiedEmbeddings || source.format === "gguf") output = embedding;
  else {
    throw new InferenceError(
      "MODEL_FORMAT",
      `${source.file}: tensor ${source.nameOf("output.weight")} is missing and the embeddings are not tied`,
      { details: { file: source.file, tensor: source.nameOf("output.weight") } },
    );
  }
  return { embedding, outputNorm, output };
}

/** Inverse RoPE frequencies of the global layers, with GGUF's rope_freqs.weight factors when present. */
export function globalRope(source: WeightSource, config: ModelConfig): Float64Array {
  if (config.ropeScaling.type === "longrope") {
    throw new InferenceError("UNSUPPORTED", `${source.file}: LongRoPE scaling is supported for phi3 only, not ${config.architecture}`, {
      details: { file: source.file, ropeScaling: "longrope" },
    });
  }
  const factors = source.optionalVector("rope_freqs.weight", config.rotaryDim / 2, false);
  return ropeInverseFrequencies(config.rotaryDim, config.ropeTheta, config.ropeScaling, factors);
}
