import { type FinishReason, InferenceError, type ResolvedGenerateOptions, type Token } from "@infer/core";
import type { LlamaContextSequence, LlamaGrammar } from "node-llama-cpp";
import { decodeSequence, type DecodeTimings } from "./decode.js";
import { decodeWithLogprobs } from "./logprob-decode.js";
import type { LlamaCppParts } from "./parts.js";
import { grammarState, samplerSettings } from "./sampling.js";

/**
 * Starts generating `prompt` on `sequence`: node-llama-cpp's own evaluation
 * loop normally, the slower step-by-step path when `logprobs` is asked.
 */
export async function startDecoding(
  parts: LlamaCppParts,
  sequence: LlamaContextSequence,
  prompt: number[],
  options: ResolvedGenerateOptions,
  grammar: LlamaGrammar | undefined,
  signal: AbortSignal,
  timings: DecodeTimings,
  onLogits?: (logits: Float32Array) => void,
): Promise<AsyncGenerator<Token, FinishReason, undefined>> {
  const request = {
    prompt,
    sampler: samplerSettings(options, options),
    stopTokens: new Set(options.stopTokens),
    maxTokens: options.maxTokens,
    ignoreEos: options.ignoreEos ?? false,
    signal,
    reusePrefix: parts.reusePrefixes,
  };
  if (options.logprobs === undefined) {
    return decodeSequence(parts.model, sequence, { ...request, grammar: await grammarState(parts.model, grammar) }, timings);
  }
  const logprobs = options.logprobs;
  return decodeWithLogprobs(parts.model, sequence, { ...request, logprobs, vocabSize: parts.info.vocabSize, onLogits }, timings);
}

/**
 * The logprobs path samples in JavaScript, where llama.cpp's grammar sampler
 * cannot reach; the combination is refused rather than ignored.
 */
export function assertLogprobsCombinable(options: ResolvedGenerateOptions): void {
  if (options.logprobs === undefined) return;
  const constraint = options.grammar !== undefined ? "grammar" : options.jsonSchema !== undefined ? "jsonSchema" : undefined;
  if (constraint === undefined) return;
  throw new InferenceError(
    "UNSUPPORTED",
    `backend llama_cpp cannot combine option 'logprobs' with '${constraint}'; drop one of them`,
    { details: { option: "logprobs", with: constraint } },
  );
}
