import { abortedError, commonPrefixLength, type FinishReason, InferenceError, pickSlot, type Token } from "@infer/core";
import type { LlamaContextSequence, LlamaGrammarEvaluationState, LlamaModel } from "node-llama-cpp";
import { asLlamaTokens } from "./runtime.js";
import { evaluateOptions, type SamplerSettings } from "./sampling.js";
import { TokenTextStream } from "./token-text.js";

/** What one sequence is asked to do. */
export interface DecodeRequest {
  prompt: number[];
  sampler: SamplerSettings;
  stopTokens: ReadonlySet<number>;
  /** The caller's maxTokens: reached with a character still incomplete, its bytes are released as they are. */
  maxTokens?: number;
  ignoreEos: boolean;
  grammar?: LlamaGrammarEvaluationState;
  signal: AbortSignal;
  /** Keep the tokens the sequence already evaluated that begin the prompt (prefix reuse). */
  reusePrefix: boolean;
}

/** Timings of one sequence, for metrics. */
export interface DecodeTimings {
  /** performance.now() when the first token came out (end of prefill); undefined before. */
  firstTokenAt?: number;
  generated: number;
  /** Prompt tokens the sequence already held, reused instead of evaluated. */
  cachedPromptTokens?: number;
}

/** When each sequence was last given a prompt, so a new conversation takes the least recently used one. */
const usedAt = new WeakMap<LlamaContextSequence, number>();
let clock = 0;

/**
 * Gives each prompt one of `free` sequences, preferring the one that holds
 * the conversation it continues (a chat's earlier turns), so the call
 * evaluates only the rest (core's `pickSlot` chooses).
 */
export function assignSequences(free: readonly LlamaContextSequence[], prompts: readonly number[][]): LlamaContextSequence[] {
  const left = [...free];
  return prompts.map((prompt) => {
    const candidates = left.map((sequence) => ({
      sequence,
      held: sequence.contextTokens.length,
      shared: commonPrefixLength(sequence.contextTokens, prompt),
      usedAt: usedAt.get(sequence) ?? 0,
    }));
    const { sequence } = pickSlot(candidates);
    left.splice(left.indexOf(sequence), 1);
    usedAt.set(sequence, ++clock);
    return sequence;
  });
}

/**
 * Brings `sequence` to the state "prompt minus its last token evaluated",
 * keeping, with `reuse`, the longest cached prefix it shares with `prompt`
 * (prefix reuse across calls), and returns the tokens still to evaluate (at
 * least one, since the logits of the last prompt position are needed).
 */
export async function prepareSequence(sequence: LlamaContextSequence, prompt: number[], reuse = true): Promise<number[]> {
  const keep = reuse ? Math.min(commonPrefixLength(sequence.contextTokens, prompt), prompt.length - 1) : 0;
  if (keep < sequence.nextTokenIndex) {
    await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  }
  // Erasing may keep less than asked (e.g. sliding-window caches); trust what is left.
  return prompt.slice(sequence.nextTokenIndex);
}

/**
 * Evaluates all but the last pending token in batch-sized chunks, checking the
 * signal between chunks, so a long prefill can be aborted. Returns the tokens
 * left (the last one, whose logits the caller samples). Prompts within one
 * batch go to llama.cpp in one piece, as node-llama-cpp would send them.
 */
export async function prefillAbortably(
  sequence: LlamaContextSequence,
  pending: number[],
  signal: AbortSignal,
): Promise<number[]> {
  const chunk = sequence.context.batchSize;
  if (pending.length <= chunk) return pending;
  let at = 0;
  while (pending.length - at > chunk) {
    if (signal.aborted) throw abortedError(signal.reason);
    const end = Math.min(at + chunk, pending.length - 1);
    await sequence.evaluateWithoutGeneratingNewTokens(asLlamaTokens(pending.slice(at, end)));
    at = end;
  }
  if (signal.aborted) throw abortedError(signal.reason);
  return pending.slice(at);
}

/** Refuses prompts that do not leave room for one generated token. */
export function assertPromptFits(prompt: number[], sequence: LlamaContextSequence): void {
  if (prompt.length === 0) {
    throw new InferenceError("INVALID_OPTION", "the prompt is empty and this model adds no BOS token to start from");
  }
  if (prompt.length >= sequence.contextSize) {
    throw new InferenceError(
      "CONTEXT_OVERFLOW",
      `the prompt is ${prompt.length} tokens but the context holds ${sequence.contextSize} per sequence; ` +
        "shorten the prompt or load with a larger contextLength",
      { details: { promptTokens: prompt.length, contextLength: sequence.contextSize } },
    );
  }
}

/**
 * Generates on one sequence until EOS / a stop token ("stop") or the end of the
 * context ("length"). Closing the generator early (maxTokens, stop strings,
 * abort) ends node-llama-cpp's evaluation in `finally`; the sequence keeps the
 * evaluated tokens, which the next call reuses or erases in `prepareSequence`.
 */
export async function* decodeSequence(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  request: DecodeRequest,
  timings: DecodeTimings,
): AsyncGenerator<Token, FinishReason, undefined> {
  const { prompt, signal } = request;
  assertPromptFits(prompt, sequence);
  const ready = await prepareSequence(sequence, prompt, request.reusePrefix);
  timings.cachedPromptTokens = prompt.length - ready.length;
  const pending = await prefillAbortably(sequence, ready, signal);

  const history = [...prompt];
  const evaluation = sequence.evaluate(asLlamaTokens(pending), {
    ...evaluateOptions(request.sampler, history),
    grammarEvaluationState: request.grammar,
    // EOS is decided here (ignoreEos, stop tokens), so node-llama-cpp must hand it over.
    yieldEogToken: true,
  });
  const text = new TokenTextStream(model);
  try {
    for (;;) {
      const step = await evaluation.next();
      if (signal.aborted) throw abortedError(signal.reason);
      if (step.done) {
        yield* text.flush();
        return "stop";
      }
      const id = step.value;
      timings.firstTokenAt ??= performance.now();
      if (request.stopTokens.has(id) || (!request.ignoreEos && model.isEogToken(id))) {
        yield* text.flush();
        return "stop";
      }
      timings.generated++;
      history.push(id);
      yield* text.push(id);
      // Held bytes of an unfinished character must not be cut off by the
      // caller's maxTokens: emitted, they keep "texts joined = decode(ids)".
      if (request.maxTokens !== undefined && timings.generated >= request.maxTokens) {
        yield* text.flush();
        return "length";
      }
      // The token just sampled would be evaluated at position `history.length - 1`;
      // past the context's end node-llama-cpp would shift the context, which this contract reports as "length".
      if (history.length >= sequence.contextSize) {
        yield* text.flush();
        return "length";
      }
    }
  } finally {
    await evaluation.return();
  }
}
