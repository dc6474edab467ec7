/**
 * The model configuration every architecture fills in, and a reader that takes
 * each field from either a Hugging Face config.json or GGUF metadata.
 */
import { describeValue, InferenceError } from "@infer/core";
import type { Activation, RopeMode } from "../kernels/ops.js";
import type { RopeScaling } from "./rope.js";

export interface ModelConfig {
  /** Canonical architecture id: "llama", "qwen2", "qwen3", "gemma3", "phi3". */
  architecture: string;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKVHeads: number;
  /** Dims per attention head (keys, queries and values). */
  headDim: number;
  ffnSize: number;
  /** The context length the model was trained for. */
  contextLength: number;
  ropeTheta: number;
  rmsEps: number;
  ropeMode: RopeMode;
  /** Leading dims of each head that RoPE rotates (headDim unless partial rotary). */
  rotaryDim: number;
  ropeScaling: RopeScaling;
  /** Sliding-window layers' own RoPE base (Gemma 3's rope_local_base_freq); their scaling is none. */
  ropeLocalTheta: number;
  /** Per layer: attention window in tokens, 0 = full causal attention. */
  layerWindows: number[];
  /** Multiplier on q·k (1/sqrt(headDim) unless the architecture says otherwise). */
  attentionScale: number;
  /** Multiplier on the token embeddings (Gemma: sqrt(hiddenSize)). */
  embeddingScale: number;
  /** 1 where RMSNorm weights are stored as w with the norm using (1 + w) (Gemma in HF layout). */
  normUnitOffset: number;
  activation: Activation;
  /** Final-logit soft-capping (0 = off). */
  finalLogitSoftcap: number;
  /** Attention-score soft-capping (0 = off). */
  attentionSoftcap: number;
  /** The output projection shares the token embedding matrix. */
  tiedEmbeddings: boolean;
}

export type ModelFileFormat = "gguf" | "safetensors";

/**
 * Reads configuration fields by their HF config.json key or their GGUF key
 * (written without the `<architecture>.` prefix, which the reader adds).
 */
export class ConfigReader {
  constructor(
    /** The file the values come from, named in errors. */
    readonly file: string,
    readonly format: ModelFileFormat,
    private readonly lookup: (key: string) => unknown,
    /** GGUF key prefix: general.architecture. */
    readonly ggufArchitecture = "",
  ) {}

  /** Vocabulary size to use when the configuration does not state one (GGUF: the embedding's rows). */
  vocabFallback: number | undefined;

  static fromHf(file: string, config: Record<string, unknown>): ConfigReader {
    // Multimodal wrappers (e.g. Gemma 3 4B+) keep the language model's fields in text_config.
    const text = config.text_config;
    const merged = text && typeof text === "object" ? { ...config, ...(text as Record<string, unknown>) } : config;
    return new ConfigReader(file, "safetensors", (key) => merged[key]);
  }

  /** `unwrap` turns a stored metadata entry into a plain value (GGUF entries carry their value type). */
  static fromGguf(
    file: string,
    metadata: ReadonlyMap<string, unknown>,
    architecture: string,
    unwrap: (value: unknown) => unknown = (value) => value,
  ): ConfigReader {
    return new ConfigReader(file, "gguf", (key) => unwrap(metadata.get(key)), architecture);
  }

  /** The key this reader uses for a field, as named in errors. */
  keyName(hfKey: string | undefined, ggufKey: string | undefined): string | undefined {
    if (this.format === "gguf") return ggufKey === undefined ? undefined : `${this.ggufArchitecture}.${ggufKey}`;
    return hfKey;
  }

  /** The raw value of a field, or undefined when absent (or null in JSON). */
  raw(hfKey: string | undefined, ggufKey: string | undefined): unknown {
    const key = this.keyName(hfKey, ggufKey);
    if (key === undefined) return undefined;
    const value = this.lookup(key);
    return value === null ? undefined : value;
  }

  /** A value read by its full GGUF key or HF key, with no prefix added. */
  rawExact(key: string): unknown {
    const value = this.lookup(key);
    return value === null ? undefined : value;
  }

  /** A finite number; `fallback` when absent, MODEL_FORMAT when absent without fallback or not a number. */
  number(hfKey: string | undefined, ggufKey: string | undefined, fallback?: number): number {
    const value = this.optionalNumber(hfKey, ggufKey);
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback;
    throw this.missing(hfKey, ggufKey);
  }

  /**
   * A positive integer field (dims, counts) of at most `max`. Configuration is
   * read before any tensor shape is checked, so anything sized from it must be bounded here.
   */
  positiveInt(hfKey: string | undefined, ggufKey: string | undefined, fallback?: number, max = 2 ** 31): number {
    const value = this.number(hfKey, ggufKey, fallback);
    if (!Number.isInteger(value) || value <= 0 || value > max) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `${this.file}: field ${this.keyName(hfKey, ggufKey)} must be a positive integer of at most ${max}, got ${value}`,
        { details: { file: this.file, field: this.keyName(hfKey, ggufKey) } },
      );
    }
    return value;
  }

  optionalNumber(hfKey: string | undefined, ggufKey: string | undefined): number | undefined {
    const value = this.raw(hfKey, ggufKey);
    if (value === undefined) return undefined;
    const number = typeof value === "bigint" ? Number(value) : value;
    if (typeof number !== "number" || !Number.isFinite(number)) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `${this.file}: field ${this.keyName(hfKey, ggufKey)} must be a number, got ${describeValue(value)}`,
        { details: { file: this.file, field: this.keyName(hfKey, ggufKey) } },
      );
    }
    return number;
  }

  missing(hfKey: string | undefined, ggufKey: string | undefined): InferenceError {
    const field = this.keyName(hfKey, ggufKey) ?? hfKey ?? ggufKey;
    return new InferenceError("MODEL_FORMAT", `${this.file}: required field ${field} is missing`, {
      details: { file: this.file, field },
    });
  }
}
