import {
  abortedError,
  type BatchResult,
  type FinishReason,
  isInferenceError,
  type ResolvedGenerateOptions,
  collectStopped,
  SequenceStopper,
  type Token,
  toInferenceError,
} from "@infer/core";
import type { LlamaContextSequence, LlamaGrammar } from "node-llama-cpp";
import type { DecodeTimings } from "./decode.js";
import type { LlamaCppParts } from "./model.js";
import { compileGrammar } from "./sampling.js";
import { assertLogprobsCombinable, startDecoding } from "./start-decode.js";

export interface BatchOutcome {
  results: BatchResult[];
  /** When the first wave's prefill ended (its first token), for metrics. */
  firstTokenAt?: number;
}

/**
 * Decodes the prompts on the context's sequences at once: node-llama-cpp
 * gathers the pending tokens of every sequence into one llama.cpp batch, so a
 * wave of `slots` prompts costs about one decode per step, not one per prompt.
 * More prompts than slots run in waves. A failing prompt records its error and
 * leaves the others running.
 */
export async function runBatch(
  parts: LlamaCppParts,
  prompts: number[][],
  options: ResolvedGenerateOptions,
  signal: AbortSignal,
  onToken?: (index: number, token: Token) => void,
  onFinish?: (index: number, result: BatchResult) => void,
  /** Each step's raw logits of a sequence, with the index of the token they choose, on the logprobs path (the `logits` probe). */
  onLogits?: (index: number, logits: Float32Array, step: number) => void,
): Promise<BatchOutcome> {
  assertLogprobsCombinable(options);
  const grammar = await compileGrammar(parts.llama, options);
  const results: BatchResult[] = [];
  let firstTokenAt: number | undefined;
  for (let start = 0; start < prompts.length; start += parts.slots.length) {
    const wave = prompts.slice(start, start + parts.slots.length);
    const timings = wave.map((): DecodeTimings => ({ generated: 0 }));
    results.push(
      ...(await Promise.all(
        wave.map(async (prompt, i) => {
          const index = start + i;
          const timing = timings[i]!;
          const result = await runOne(
            parts,
            parts.slots[i]!,
            prompt,
            options,
            grammar,
            signal,
            timing,
            (token) => onToken?.(index, token),
            (logits) => onLogits?.(index, logits, timing.generated),
          );
          onFinish?.(index, result);
          return result;
        }),
      )),
    );
    if (start === 0) {
      const firsts = timings.map((t) => t.firstTokenAt).filter((t): t is number => t !== undefined);
      if (firsts.length > 0) firstTokenAt = Math.max(...firsts);
    }
  }
  return { results, firstTokenAt };
}

async function runOne(
  parts: LlamaCppParts,
  sequence: LlamaContextSequence,
  prompt: number[],
  options: ResolvedGenerateOptions,
  grammar: LlamaGrammar | undefined,
  signal: AbortSignal,
  timings: DecodeTimings,
  onToken: (token: Token) => void,
  onLogits: (logits: Float32Array) => void,
): Promise<BatchResult> {
  const tokens: Token[] = [];
  try {
    if (signal.aborted) throw abortedError(signal.reason);
    const decoding = await startDecoding(parts, sequence, prompt, options, grammar, signal, timings, onLogits);
    const { finishReason } = await collectStopped(decoding, new SequenceStopper(options), tokens, onToken);
    return collected(tokens, finishReason);
  } catch (error) {
    if (isInferenceError(error, "ABORTED")) return collected(tokens, "abort");
    return { ...collected(tokens, "error"), error: toInferenceError(error) };
  }
}

function collected(tokens: Token[], finishReason: FinishReason): BatchResult {
  return { tokens, text: tokens.map((t) => t.text).join(""), finishReason };
}
