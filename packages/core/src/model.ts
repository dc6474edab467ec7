import type { BatchGenerateOptions, BatchPrompt, ClassifyOptions, GenerateOptions } from "./options.js";
import type {
  BatchResult,
  ClassifyResult,
  GenerateMetrics,
  GenerationResult,
  Message,
  ModelInfo,
  Token,
} from "./types.js";

/** The contract every backend's model implements. */
export interface TextModel {
  /** Architecture id ("llama", "qwen3", ...). */
  readonly modelType: string;
  /** Name of the backend that loaded this model. */
  readonly backend: string;

  /** Streams the continuation of `prompt`. Iteration throws on error (`err()` keeps it); EOS just ends it. */
  generate(prompt: string, options?: GenerateOptions): AsyncIterable<Token>;
  /** Streams the assistant's answer, rendered with the model's own chat template. */
  chat(messages: Message[], options?: GenerateOptions): AsyncIterable<Token>;
  /** `generate` collected: text, tokens, finish reason and metrics. Abort resolves with reason "abort". */
  generateText(prompt: string, options?: GenerateOptions): Promise<GenerationResult>;
  chatText(messages: Message[], options?: GenerateOptions): Promise<GenerationResult>;
  /** One prefill per prompt; the token at the last position and optionally its full logits. */
  classify(prompts: string[], options?: ClassifyOptions): Promise<ClassifyResult[]>;
  /**
   * Decodes the prompts together; one prompt's failure never sinks the others.
   * A prompt may be messages (rendered with the chat template); `onToken`
   * streams each prompt's tokens as they are released.
   */
  batchGenerate(prompts: BatchPrompt[], options?: BatchGenerateOptions): Promise<BatchResult[]>;

  info(): ModelInfo;
  /** Metrics of the last completed call (batch calls sum their tokens). */
  metrics(): GenerateMetrics;
  /** The error of the last call, or undefined when it succeeded. */
  err(): Error | undefined;
  /** Frees the model; idempotent. Any later call fails with `CLOSED`. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface EncodeOptions {
  /** Add the model's BOS (and other template) tokens; default true. */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  /** Drop control tokens (BOS, EOS, ...) from the text; default false. */
  skipSpecialTokens?: boolean;
}

/** A model that exposes its tokenizer and chat template. */
export interface TokenizerModel {
  encode(text: string, options?: EncodeOptions): number[];
  decode(ids: number[], options?: DecodeOptions): string;
  applyChatTemplate(messages: Message[], options?: { addGenerationPrompt?: boolean; chatTemplate?: string }): string;
}

export interface EmbeddingModel {
  /** One vector per text. */
  embed(texts: string[], options?: { signal?: AbortSignal; normalize?: boolean }): Promise<Float32Array[]>;
}

export interface AttentionSnapshot {
  numLayers: number;
  numKVHeads: number;
  numQueryHeads: number;
  seqLen: number;
  headDim: number;
  /** keys[layer][kvHead]: seqLen x headDim, row-major. */
  keys: Float32Array[][];
  /** queries[layer][queryHead]: seqLen x headDim, when the backend keeps them. */
  queries?: Float32Array[][];
}

export interface AttentionInspector {
  inspectAttention(prompt: string, options?: { signal?: AbortSignal }): Promise<AttentionSnapshot>;
}

/** A model that can save and restore its KV cache state. */
export interface KVSnapshotModel {
  snapshotKV(): Promise<Uint8Array>;
  restoreKV(snapshot: Uint8Array): Promise<void>;
}

export function isTokenizerModel(model: object): model is TokenizerModel {
  return hasMethods(model, ["encode", "decode", "applyChatTemplate"]);
}
export function isEmbeddingModel(model: object): model is EmbeddingModel {
  return hasMethods(model, ["embed"]);
}
export function isAttentionInspector(model: object): model is AttentionInspector {
  return hasMethods(model, ["inspectAttention"]);
}
export function isKVSnapshotModel(model: object): model is KVSnapshotModel {
  return hasMethods(model, ["snapshotKV", "restoreKV"]);
}

export function hasMethods(value: object, names: string[]): boolean {
  return names.every((name) => typeof (value as Record<string, unknown>)[name] === "function");
}
