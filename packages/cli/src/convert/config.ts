import { InferenceError } from "@infer/core";
import { f32, type Metadata, u32 } from "./values.js";

/** The GGUF architectures this converter writes, by config.json `model_type`. */
const ARCHITECTURES: Record<string, "llama" | "qwen2" | "qwen3"> = { llama: "llama", mistral: "llama", qwen2: "qwen2", qwen3: "qwen3" };
export const CONVERTIBLE_MODEL_TYPES = Object.keys(ARCHITECTURES);

/** What the tensor and vocabulary steps need to know about the model. */
export interface ArchPlan {
  arch: "llama" | "qwen2" | "qwen3";
  modelType: string;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
  tiedEmbeddings: boolean;
  /**
   * llama.cpp runs "llama" with interleaved (GPT-J style) rotary pairs while
   * Hugging Face stores q/k for split-half pairs, so their rows are permuted;
   * qwen2/qwen3 use split halves in both and need nothing.
   */
  permuteQK: boolean;
  metadata: Metadata;
  /** llama3 rope scaling: per-frequency factors, written as rope_freqs.weight [headDim / 2]. */
  ropeFactors?: Float32Array;
}

function field(config: Record<string, unknown>, key: string, file: string): number {
  const value = config[key];
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0 || value > 1 << 24) {
    throw new InferenceError("MODEL_FORMAT", `${file}: '${key}' must be a positive integer (got ${JSON.stringify(value)})`, { details: { file, field: key } });
  }
  return value;
}

export function planFromConfig(config: Record<string, unknown>, file: string, name: string): ArchPlan {
  const modelType = String(config.model_type);
  const arch = ARCHITECTURES[modelType];
  if (!arch) {
    throw new InferenceError(
      "UNSUPPORTED_ARCHITECTURE",
      `${file}: model_type '${modelType}' cannot be converted yet (convertible: ${CONVERTIBLE_MODEL_TYPES.join(", ")})`,
      { details: { file, modelType } },
    );
  }
  const hidden = field(config, "hidden_size", file);
  const heads = field(config, "num_attention_heads", file);
  const kvHeads = config.num_key_value_heads === undefined ? heads : field(config, "num_key_value_heads", file);
  const headDim = config.head_dim === undefined || config.head_dim === null ? hidden / heads : field(config, "head_dim", file);
  if (!Number.isInteger(headDim) || heads % kvHeads !== 0) {
    throw new InferenceError("MODEL_FORMAT", `${file}: hidden_size ${hidden}, ${heads} heads and ${kvHeads} KV heads do not fit together`, { details: { file } });
  }
  const layers = field(config, "num_hidden_layers", file);
  const vocabSize = field(config, "vocab_size", file);
  const ropeTheta = typeof config.rope_theta === "number" ? config.rope_theta : 10000;
  const metadata: Metadata = {
    "general.architecture": arch,
    "general.name": name,
    [`${arch}.context_length`]: u32(field(config, "max_position_embeddings", file)),
    [`${arch}.embedding_length`]: u32(hidden),
    [`${arch}.block_count`]: u32(layers),
    [`${arch}.feed_forward_length`]: u32(field(config, "intermediate_size", file)),
    [`${arch}.attention.head_count`]: u32(heads),
    [`${arch}.attention.head_count_kv`]: u32(kvHeads),
    [`${arch}.attention.layer_norm_rms_epsilon`]: f32(typeof config.rms_norm_eps === "number" ? config.rms_norm_eps : 1e-6),
    [`${arch}.rope.freq_base`]: f32(ropeTheta),
    [`${arch}.rope.dimension_count`]: u32(headDim),
    [`${arch}.vocab_size`]: u32(vocabSize),
  };
  if (config.head_dim !== undefined && config.head_dim !== null) {
    metadata[`${arch}.attention.key_length`] = u32(headDim);
    metadata[`${arch}.attention.value_length`] = u32(headDim);
  }
  const plan: ArchPlan = {
    arch,
    modelType,
    layers,
    heads,
    kvHeads,
    headDim,
    vocabSize,
    tiedEmbeddings: config.tie_word_embeddings === true,
    permuteQK: arch === "llama",
    metadata,
  };
  applyRopeScaling(plan, config, file, ropeTheta);
  return plan;
}

function applyRopeScaling(plan: ArchPlan, config: Record<string, unknown>, file: string, theta: number): void {
  const scaling = config.rope_scaling as Record<string, unknown> | null | undefined;
  if (scaling === null || scaling === undefined) return;
  const type = String(scaling.rope_type ?? scaling.type);
  const factor = Number(scaling.factor);
  const a = plan.arch;
  if (type === "default") return;
  if (type === "linear" && factor > 0) {
    plan.metadata[`${a}.rope.scaling.type`] = "linear";
    plan.metadata[`${a}.rope.scaling.factor`] = f32(factor);
  } else if (type === "yarn" && factor > 0) {
    plan.metadata[`${a}.rope.scaling.type`] = "yarn";
    plan.metadata[`${a}.rope.scaling.factor`] = f32(factor);
    if (typeof scaling.original_max_position_embeddings === "number") {
      plan.metadata[`${a}.rope.scaling.original_context_length`] = u32(scaling.original_max_position_embeddings);
    }
  } else if (type === "llama3" && factor > 0) {
    plan.ropeFactors = llama3RopeFactors(plan.headDim, theta, {
      factor,
      low: Number(scaling.low_freq_factor ?? 1),
      high: Number(scaling.high_freq_factor ?? 4),
      original: Number(scaling.original_max_position_embeddings ?? 8192),
    });
  } else {
    throw new InferenceError("UNSUPPORTED", `${file}: rope_scaling type '${type}' cannot be converted (linear, yarn and llama3 can)`, { details: { file } });
  }
}

/**
 * Llama 3's frequency-dependent RoPE scaling: long wavelengths are divided by
 * `factor`, short ones kept, the band between blended smoothly. llama.cpp
 * reads the per-frequency divisors from the rope_freqs tensor.
 */
export function llama3RopeFactors(headDim: number, theta: number, s: { factor: number; low: number; high: number; original: number }): Float32Array {
  const lowWavelen = s.original / s.low;
  const highWavelen = s.original / s.high;
  const factors = new Float32Array(headDim / 2);
  for (let i = 0; i < factors.length; i++) {
    const freq = 1 / Math.pow(theta, (2 * i) / headDim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) factors[i] = 1;
    else if (wavelen > lowWavelen) factors[i] = s.factor;
    else {
      const smooth = (s.original / wavelen - s.low) / (s.high - s.low);
      factors[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return factors;
}
