import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { capabilitiesOf, type FinishReason, isInferenceError, type TextModel, type Token } from "@infer/core";
import type { Batcher } from "./batcher.js";
import { HttpError } from "./errors.js";
import { sendJson } from "./http-io.js";
import { chatLogprobEntries, legacyLogprobs } from "./logprobs.js";
import type { ServerMetrics } from "./metrics.js";
import type { SlotQueue } from "./queue.js";
import type { ChatRequest, TextRequest } from "./requests.js";
import { CompletionStream, type Kind, openAIFinish, type Usage } from "./stream.js";

/** One served model and its admission queue. */
export interface Served {
  name: string;
  model: TextModel;
  queue: SlotQueue;
  /** Gathers completions into `batchGenerate` calls; absent when batching is off (maxBatch 1). */
  batcher?: Batcher;
  /** A Jinja chat template used instead of the model's own. */
  chatTemplate?: string;
}

/** What a finished completion hands to its answer. */
interface Finished {
  tokens: Token[];
  finishReason: FinishReason;
}

function usageOf(promptTokens: number, completionTokens: number, cachedTokens: number | undefined): Usage {
  const usage: Usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  if (cachedTokens !== undefined) usage.prompt_tokens_details = { cached_tokens: cachedTokens };
  return usage;
}

/**
 * Serves one chat or text completion: checks the model can honour the
 * request, then decodes it (through the batcher, or alone in a slot when
 * batching is off) and answers as one JSON body or as SSE chunks.
 */
export async function runCompletion(
  kind: Kind,
  target: Served,
  request: ChatRequest | TextRequest,
  res: ServerResponse,
  signal: AbortSignal,
  metrics: ServerMetrics,
): Promise<void> {
  const { model } = target;
  if (request.wantsGrammar && capabilitiesOf(model).grammar !== "supported") {
    throw new HttpError(
      400,
      `response_format json needs constrained decoding, which the model '${target.name}' (backend ${model.backend}) does not support`,
      "invalid_request_error",
      "unsupported_parameter",
      "response_format",
    );
  }
  if (request.options.logprobs !== undefined && capabilitiesOf(model)["probe.logits"] !== "supported") {
    throw new HttpError(
      400,
      `the model '${target.name}' (backend ${model.backend}) cannot report logprobs: it does not expose its logits (capability probe.logits)`,
      "invalid_request_error",
      "unsupported_parameter",
      "logprobs",
    );
  }
  const stream = request.stream
    ? new CompletionStream(res, {
        kind,
        id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`,
        created: Math.floor(Date.now() / 1000),
        model: target.name,
        echo: echoOf(kind, request),
        wantsLogprobs: request.options.logprobs !== undefined,
        includeUsage: request.includeUsage,
        returnTokenIds: request.returnTokenIds,
      })
    : undefined;
  let finished: Finished;
  let promptTokens: number;
  let cachedTokens: number | undefined;
  try {
    if (target.batcher) {
      const prompt = kind === "chat" ? (request as ChatRequest).messages : (request as TextRequest).prompt;
      const onToken = stream && ((token: Token) => stream.token(token));
      const outcome = await target.batcher.submit({ prompt, options: request.options, signal, onToken });
      ({ promptTokens, cachedPromptTokens: cachedTokens } = outcome);
      finished = outcome;
    } else {
      finished = await runAlone(kind, target, request, signal, stream);
      ({ promptTokens, cachedPromptTokens: cachedTokens } = model.metrics());
    }
  } catch (error) {
    // Before the first chunk the error gets its own HTTP status; after it, it is reported in-band.
    if (!stream?.started) throw error;
    if (!isInferenceError(error, "ABORTED") && !stream.closed) stream.fail(error);
    return;
  }
  if (finished.finishReason === "abort") return; // the client is gone
  const usage = usageOf(promptTokens, finished.tokens.length, cachedTokens);
  metrics.promptTokens.add({ model: target.name }, usage.prompt_tokens);
  metrics.completionTokens.add({ model: target.name }, usage.completion_tokens);
  if (cachedTokens !== undefined) metrics.cachedPromptTokens.add({ model: target.name }, cachedTokens);
  if (stream) stream.finish(openAIFinish(finished.finishReason), usage);
  else answerWhole(kind, target.name, request, res, finished, usage);
}

function echoOf(kind: Kind, request: ChatRequest | TextRequest): string {
  return kind === "text" && (request as TextRequest).echo ? (request as TextRequest).prompt : "";
}

/** Without batching: one generation in one slot of the model's queue, through `chat` or `generate`. */
async function runAlone(
  kind: Kind,
  target: Served,
  request: ChatRequest | TextRequest,
  signal: AbortSignal,
  stream: CompletionStream | undefined,
): Promise<Finished> {
  const { model } = target;
  const release = await target.queue.acquire(signal);
  try {
    const options = { ...request.options, signal, ...(kind === "chat" && target.chatTemplate ? { chatTemplate: target.chatTemplate } : {}) };
    if (!stream) {
      return kind === "chat" ? await model.chatText((request as ChatRequest).messages, options) : await model.generateText((request as TextRequest).prompt, options);
    }
    const tokens = kind === "chat" ? model.chat((request as ChatRequest).messages, options) : model.generate((request as TextRequest).prompt, options);
    const collected: Token[] = [];
    for await (const token of tokens) {
      collected.push(token);
      stream.token(token);
    }
    // A token stream does not say why it ended; reaching maxTokens is the one "length" it can tell.
    const maxTokens = request.options.maxTokens;
    return { tokens: collected, finishReason: maxTokens !== undefined && collected.length >= maxTokens ? "length" : "stop" };
  } catch (error) {
    if (isInferenceError(error, "ABORTED")) return { tokens: [], finishReason: "abort" };
    throw error;
  } finally {
    release();
  }
}

/** Sends a finished (non-streaming) completion. */
function answerWhole(kind: Kind, modelName: string, request: ChatRequest | TextRequest, res: ServerResponse, result: Finished, usage: Usage): void {
  const finish_reason = openAIFinish(result.finishReason);
  const text = result.tokens.map((t) => t.text).join("");
  let logprobs = null;
  if (request.options.logprobs !== undefined) {
    logprobs = kind === "chat" ? { content: chatLogprobEntries(result.tokens), refusal: null } : legacyLogprobs(result.tokens, 0);
  }
  const ids = request.returnTokenIds ? { token_ids: result.tokens.map((t) => t.id) } : {};
  sendJson(res, 200, {
    id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`,
    object: kind === "chat" ? "chat.completion" : "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: modelName,
    choices: [
      kind === "chat"
        ? { index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs, finish_reason, ...ids }
        : { index: 0, text: echoOf(kind, request) + text, logprobs, finish_reason, ...ids },
    ],
    usage,
  });
}
