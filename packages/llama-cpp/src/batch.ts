import { abortedError, type BatchSink, decodeInto, type ResolvedGenerateOptions } from "@infer/core";
import { assignSequences, type DecodeTimings } from "./decode.js";
import type { LlamaCppParts } from "./parts.js";
import { compileGrammar } from "./sampling.js";
import { assertLogprobsCombinable, startDecoding } from "./start-decode.js";

export interface BatchOutcome {
  /** When the first wave's prefill ended (its first token), for metrics. */
  firstTokenAt?: number;
  /** Tokens decoded over all prompts. */
  generated: number;
  /** Prompt tokens reused from what the sequences already held. */
  cachedPromptTokens: number;
}

/**
 * Decodes the prompts on the context's sequences at once: node-llama-cpp
 * gathers the pending tokens of every sequence into one llama.cpp batch, so a
 * wave of `slots` prompts costs about one decode per step, not one per prompt.
 * More prompts than slots run in waves. Each prompt's tokens go to `sink`,
 * which ends a prompt's decoding when its stop string or maxTokens is met; a
 * failing prompt ends with its error and leaves the others running.
 */
export async function runBatch(
  parts: LlamaCppParts,
  prompts: number[][],
  options: ResolvedGenerateOptions,
  signal: AbortSignal,
  sink: BatchSink,
  /** Each step's raw logits of a sequence, with the index of the token they choose, on the logprobs path (the `logits` probe). */
  onLogits?: (index: number, logits: Float32Array, step: number) => void,
): Promise<BatchOutcome> {
  assertLogprobsCombinable(options);
  const grammar = await compileGrammar(parts.llama, options);
  let firstTokenAt: number | undefined;
  let generated = 0;
  let cachedPromptTokens = 0;
  for (let start = 0; start < prompts.length; start += parts.slots.length) {
    const wave = prompts.slice(start, start + parts.slots.length);
    const timings = wave.map((): DecodeTimings => ({ generated: 0 }));
    const sequences = parts.reusePrefixes ? assignSequences(parts.slots, wave) : parts.slots;
    await Promise.all(
      wave.map((prompt, i) => {
        const index = start + i;
        const timing = timings[i]!;
        return decodeInto(sink, index, async () => {
          if (signal.aborted) throw abortedError(signal.reason);
          return startDecoding(parts, sequences[i]!, prompt, options, grammar, signal, timing, (logits) =>
            onLogits?.(index, logits, timing.generated),
          );
        });
      }),
    );
    generated += timings.reduce((sum, t) => sum + t.generated, 0);
    cachedPromptTokens += timings.reduce((sum, t) => sum + (t.cachedPromptTokens ?? 0), 0);
    if (start === 0) {
      const firsts = timings.map((t) => t.firstTokenAt).filter((t): t is number => t !== undefined);
      if (firsts.length > 0) firstTokenAt = Math.max(...firsts);
    }
  }
  return { firstTokenAt, generated, cachedPromptTokens };
}
