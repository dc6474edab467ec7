import { abortedError, type FinishReason, InferenceError, scoreToken, type Token } from "@infer/core";
import type { LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { assertPromptFits, type DecodeRequest, type DecodeTimings, prefillAbortably, prepareSequence } from "./decode.js";
import { LogitSampler } from "./logit-sampler.js";
import { asLlamaTokens } from "./runtime.js";
import { TokenTextStream } from "./token-text.js";

/** What the logprobs path needs beyond a plain decode. */
export interface LogprobRequest extends Omit<DecodeRequest, "grammar"> {
  /** Alternatives per token (0-20). */
  logprobs: number;
  vocabSize: number;
  /** Sees each step's raw logits [vocabSize] before sampling (the `logits` probe). */
  onLogits?: (logits: Float32Array) => void;
}

/**
 * Generates like `decodeSequence`, one `controlledEvaluate` per step, and
 * attaches to each token its log-probability and the `logprobs` most likely
 * alternatives: log softmax of the step's raw logits, before penalties and
 * filters. Tokens are picked by `LogitSampler` (see there why, and what that
 * means for seeds). Slower than the normal path (a full-vocabulary logits
 * transfer per step, no speculative decoding), so it is used only when asked.
 */
export async function* decodeWithLogprobs(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  request: LogprobRequest,
  timings: DecodeTimings,
): AsyncGenerator<Token, FinishReason, undefined> {
  const { prompt, signal } = request;
  assertPromptFits(prompt, sequence);
  const ready = await prepareSequence(sequence, prompt, request.reusePrefix);
  timings.cachedPromptTokens = prompt.length - ready.length;
  let pending = await prefillAbortably(sequence, ready, signal);
  const sampler = new LogitSampler(request.sampler);
  const history = [...prompt];
  const text = new TokenTextStream(model);
  // Scores of tokens pushed into `text` and not yet released, oldest first:
  // the stream releases held tokens in order, so they pair up one to one.
  const scored: Pick<Token, "logprob" | "topLogprobs">[] = [];
  const attach = (tokens: Token[]) => tokens.map((token) => ({ ...token, ...scored.shift() }));
  const alternativeText = (id: number) => model.detokenize(asLlamaTokens([id]), true);

  for (;;) {
    if (signal.aborted) throw abortedError(signal.reason);
    const logits = await rawLogitsAfter(sequence, pending, request.vocabSize);
    if (signal.aborted) throw abortedError(signal.reason);
    request.onLogits?.(logits);
    const id = sampler.sample(logits, history);
    timings.firstTokenAt ??= performance.now();
    if (request.stopTokens.has(id) || (!request.ignoreEos && model.isEogToken(asLlamaTokens([id])[0]!))) {
      yield* attach(text.flush());
      return "stop";
    }
    timings.generated++;
    history.push(id);
    scored.push(scoreToken(logits, id, request.logprobs, alternativeText));
    yield* attach(text.push(id));
    if (request.maxTokens !== undefined && timings.generated >= request.maxTokens) {
      yield* attach(text.flush());
      return "length";
    }
    // As in decodeSequence: no room to evaluate the sampled token is "length".
    if (history.length >= sequence.contextSize) {
      yield* attach(text.flush());
      return "length";
    }
    pending = [id];
  }
}

/**
 * Evaluates `tokens` on the sequence and returns the raw logits [vocabSize]
 * after the last one. The greedy chain (temperature 0, no penalties) leaves
 * llama.cpp's candidates as the model produced them.
 */
async function rawLogitsAfter(sequence: LlamaContextSequence, tokens: number[], vocabSize: number): Promise<Float32Array> {
  const ids = asLlamaTokens(tokens);
  const output = await sequence.controlledEvaluate([
    ...ids.slice(0, -1),
    [ids[ids.length - 1]!, { generateNext: { logits: true, options: { temperature: 0 } } }],
  ]);
  return denseLogits(output[ids.length - 1]?.next.logits, vocabSize);
}

/** node-llama-cpp gives logits as a Map sorted by value; they are wanted indexed by token id. */
export function denseLogits(logits: Map<number, number> | undefined, vocabSize: number): Float32Array {
  if (!logits || logits.size !== vocabSize) {
    throw new InferenceError(
      "INTERNAL",
      `llama.cpp returned ${logits?.size ?? 0} logits for a step; the vocabulary has ${vocabSize}`,
    );
  }
  const dense = new Float32Array(vocabSize);
  for (const [id, value] of logits) dense[id] = value;
  return dense;
}
