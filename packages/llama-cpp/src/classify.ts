import { abortedError, type ClassifyOptions, type ClassifyResult, InferenceError } from "@infer/core";
import type { ControlledEvaluateInputItem, LlamaContextSequence } from "node-llama-cpp";
import { assertPromptFits, prefillAbortably, prepareSequence } from "./decode.js";
import { denseLogits } from "./logprob-decode.js";
import type { LlamaCppParts } from "./parts.js";
import { asLlamaTokens } from "./runtime.js";
import { samplerSettings } from "./sampling.js";

/** classify is greedy unless the caller asks for sampling. */
const CLASSIFY_DEFAULTS = { temperature: 0, topK: 0, topP: 1, minP: 0, repeatPenalty: 1, repeatLastN: 0 };

/**
 * One prefill per prompt, the prompts spread over the context's sequences so
 * a wave of them decodes in one batch; the token at each last position and,
 * when asked, the raw logits there over the whole vocabulary.
 */
export async function classifyPrompts(
  parts: LlamaCppParts,
  prompts: number[][],
  options: ClassifyOptions,
  signal: AbortSignal,
): Promise<ClassifyResult[]> {
  const results: ClassifyResult[] = [];
  for (let start = 0; start < prompts.length; start += parts.slots.length) {
    if (signal.aborted) throw abortedError(signal.reason);
    const wave = prompts.slice(start, start + parts.slots.length);
    results.push(
      ...(await Promise.all(wave.map((prompt, i) => classifyOne(parts, parts.slots[i]!, prompt, options, signal)))),
    );
  }
  return results;
}

async function classifyOne(
  parts: LlamaCppParts,
  sequence: LlamaContextSequence,
  prompt: number[],
  options: ClassifyOptions,
  signal: AbortSignal,
): Promise<ClassifyResult> {
  assertPromptFits(prompt, sequence);
  const pending = await prefillAbortably(sequence, await prepareSequence(sequence, prompt, parts.reusePrefixes), signal);
  const sampler = samplerSettings(options, CLASSIFY_DEFAULTS);
  const last: ControlledEvaluateInputItem = [
    asLlamaTokens(pending)[pending.length - 1]!,
    {
      generateNext: {
        token: true,
        logits: options.logits === true,
        options: {
          temperature: sampler.temperature,
          topK: sampler.topK,
          topP: sampler.topP,
          minP: sampler.minP,
          seed: sampler.seed,
        },
      },
    },
  ];
  const output = await sequence.controlledEvaluate([...asLlamaTokens(pending.slice(0, -1)), last]);
  const next = output[pending.length - 1]?.next;
  if (next?.token === undefined || next.token === null) {
    throw new InferenceError("INTERNAL", "llama.cpp returned no token at the last prompt position");
  }
  const id = next.token;
  const result: ClassifyResult = { token: { id, text: parts.model.detokenize([id], true) } };
  if (options.logits === true) result.logits = denseLogits(next.logits, parts.info.vocabSize);
  return result;
}
