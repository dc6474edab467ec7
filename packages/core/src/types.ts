/** One generated token: its vocabulary id and the text it adds to the stream. */
export interface Token {
  id: number;
  /**
   * Exactly the text this token adds: the concatenation of every `text` of a
   * stream equals the decoded ids. A UTF-8 character split over several tokens
   * arrives whole with the token that completes it (earlier ones carry "").
   */
  text: string;
  /** Natural log of this token's probability, when `logprobs` was asked. */
  logprob?: number;
  /** The most likely tokens at this step, most likely first, when `logprobs` > 0 was asked. */
  topLogprobs?: TokenLogprob[];
}

export interface TokenLogprob {
  id: number;
  text: string;
  logprob: number;
}

export type Role = "system" | "user" | "assistant" | "tool";

export interface Message {
  role: Role;
  content: string;
}

/** Why a generation ended. */
export type FinishReason = "stop" | "length" | "abort" | "error";

export interface ClassifyResult {
  /** The token chosen at the last prompt position (greedy unless sampling options say otherwise). */
  token: Token;
  /** Full-vocabulary logits at the last position, when `logits: true` was asked. */
  logits?: Float32Array;
}

export interface BatchResult {
  tokens: Token[];
  text: string;
  finishReason: FinishReason;
  /** Set when this prompt failed; the other prompts of the batch are unaffected. */
  error?: Error;
}

export interface GenerateMetrics {
  /** Tokens in the prompt(s), reused or evaluated. */
  promptTokens: number;
  /**
   * Of `promptTokens`, those whose KV entries were reused from an earlier call
   * (prefix reuse) instead of evaluated; `promptTokens - cachedPromptTokens` were evaluated.
   */
  cachedPromptTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  totalMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** Highest memory the backend held for this model during the call, in bytes (0 when unknown). */
  peakMemoryBytes: number;
  /** Memory the backend holds for this model now, in bytes (0 when unknown). */
  activeMemoryBytes: number;
}

export type ModelFormat = "gguf" | "safetensors" | "llama2c" | "remote" | "unknown";

export interface ModelInfo {
  /** Architecture id, e.g. "llama", "qwen2", "qwen3", "gemma3", "phi3". */
  architecture: string;
  vocabSize: number;
  numLayers: number;
  hiddenSize: number;
  /** Context length the model was loaded with (tokens). */
  contextLength: number;
  /** Bits per weight of the dominant weight type (32 for F32, 16 for F16/BF16, 8 for Q8_0, ...). */
  quantBits: number;
  /** Quantization block size (0 when weights are not block-quantized). */
  quantGroup: number;
  format: ModelFormat;
  /** Total parameter count, when the backend knows it. */
  parameters?: number;
  /** The context length the model was trained for, when its file says. */
  trainedContextLength?: number;
  /**
   * What the caller should know about this load, which went ahead anyway: e.g.
   * a context longer than the model was trained for (as llama.cpp does, the
   * load warns and proceeds; text past the trained length may degrade).
   */
  warnings?: string[];
}

/** The warnings every backend gives for a context length against the model's trained one (see ModelInfo.warnings). */
export function contextLengthWarnings(contextLength: number, trainedContextLength: number | undefined): string[] {
  if (trainedContextLength === undefined || contextLength <= trainedContextLength) return [];
  return [
    `contextLength ${contextLength} is beyond the ${trainedContextLength} tokens the model was trained for; ` +
      "positions past that may give degraded text",
  ];
}

/** The result of the convenience calls `generateText` / `chatText`. */
export interface GenerationResult {
  text: string;
  tokens: Token[];
  finishReason: FinishReason;
  metrics: GenerateMetrics;
}

export function emptyMetrics(): GenerateMetrics {
  return {
    promptTokens: 0,
    cachedPromptTokens: 0,
    generatedTokens: 0,
    prefillMs: 0,
    decodeMs: 0,
    totalMs: 0,
    prefillTokensPerSec: 0,
    decodeTokensPerSec: 0,
    peakMemoryBytes: 0,
    activeMemoryBytes: 0,
  };
}

/** Builds metrics from raw counts and timings, deriving the rates. */
export function makeMetrics(fields: {
  promptTokens: number;
  cachedPromptTokens?: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  totalMs: number;
  peakMemoryBytes?: number;
  activeMemoryBytes?: number;
}): GenerateMetrics {
  const rate = (count: number, ms: number) => (ms > 0 ? (count * 1000) / ms : 0);
  const cachedPromptTokens = fields.cachedPromptTokens ?? 0;
  return {
    promptTokens: fields.promptTokens,
    cachedPromptTokens,
    generatedTokens: fields.generatedTokens,
    prefillMs: fields.prefillMs,
    decodeMs: fields.decodeMs,
    totalMs: fields.totalMs,
    // Prefill speed counts the tokens it evaluated: reused ones cost it nothing.
    prefillTokensPerSec: rate(fields.promptTokens - cachedPromptTokens, fields.prefillMs),
    // The first generated token comes out of prefill; decode produced the rest.
    decodeTokensPerSec: rate(Math.max(0, fields.generatedTokens - 1), fields.decodeMs),
    peakMemoryBytes: fields.peakMemoryBytes ?? 0,
    activeMemoryBytes: fields.activeMemoryBytes ?? 0,
  };
}
