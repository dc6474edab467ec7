import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { capabilitiesOf, type FinishReason, type GenerationResult, isInferenceError, isTokenizerModel, type TextModel, type Token } from "@infer/core";
import type { Batcher } from "./batcher.js";
import { HttpError, toHttpError } from "./errors.js";
import { sendJson, SseWriter } from "./http-io.js";
import type { ServerMetrics } from "./metrics.js";
import type { SlotQueue } from "./queue.js";
import type { ChatRequest, TextRequest } from "./requests.js";
import { characterCount, chatLogprobEntries, legacyLogprobs } from "./logprobs.js";

/** One served model and its admission queue. */
export interface Served {
  name: string;
  model: TextModel;
  queue: SlotQueue;
  /** Gathers non-streaming text completions into batches; absent when batching is off. */
  batcher?: Batcher;
}

type Kind = "chat" | "text";

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** OpenAI knows "stop" and "length"; an abort only happens when nobody is listening. */
function openAIFinish(reason: FinishReason): "stop" | "length" {
  return reason === "length" ? "length" : "stop";
}

function usageOf(model: TextModel, completionTokens: number, prompt?: string): Usage {
  // A batch's metrics sum its prompts: count this prompt with the tokenizer when there is one.
  // Otherwise slots per model default to 1, so the model's last metrics are this call's.
  const promptTokens = prompt !== undefined ? (isTokenizerModel(model) ? model.encode(prompt).length : 0) : model.metrics().promptTokens;
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/**
 * Serves one chat or text completion: checks the model can honour the
 * request, waits for a slot, then answers as one JSON body or as SSE chunks.
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
  if (kind === "text" && !request.stream && target.batcher) {
    const prompt = (request as TextRequest).prompt;
    const result = await target.batcher.submit(prompt, request.options, signal);
    answerWhole(kind, target, request, res, { ...result, metrics: model.metrics() }, metrics, usageOf(model, result.tokens.length, prompt));
    return;
  }
  const release = await target.queue.acquire(signal);
  try {
    const options = { ...request.options, signal };
    const tokens = (): AsyncIterable<Token> =>
      kind === "chat" ? model.chat((request as ChatRequest).messages, options) : model.generate((request as TextRequest).prompt, options);
    const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const echo = kind === "text" && (request as TextRequest).echo ? (request as TextRequest).prompt : "";
    if (request.stream) {
      await streamAnswer(kind, target, request, res, tokens(), { id, created, echo }, metrics);
      return;
    }
    const result = kind === "chat" ? await model.chatText((request as ChatRequest).messages, options) : await model.generateText((request as TextRequest).prompt, options);
    answerWhole(kind, target, request, res, result, metrics, usageOf(model, result.tokens.length));
  } finally {
    release();
  }
}

/** Sends a finished (non-streaming) completion. */
function answerWhole(
  kind: Kind,
  target: Served,
  request: ChatRequest | TextRequest,
  res: ServerResponse,
  result: GenerationResult,
  metrics: ServerMetrics,
  usage: Usage,
): void {
  if (result.finishReason === "abort") return; // the client is gone
  count(metrics, target.name, usage);
  const finish_reason = openAIFinish(result.finishReason);
  const echo = kind === "text" && (request as TextRequest).echo ? (request as TextRequest).prompt : "";
  let logprobs = null;
  if (request.options.logprobs !== undefined) {
    logprobs = kind === "chat" ? { content: chatLogprobEntries(result.tokens), refusal: null } : legacyLogprobs(result.tokens, 0);
  }
  sendJson(res, 200, {
    id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID()}`,
    object: kind === "chat" ? "chat.completion" : "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: target.name,
    choices: [
      kind === "chat"
        ? { index: 0, message: { role: "assistant", content: result.text, refusal: null }, logprobs, finish_reason }
        : { index: 0, text: echo + result.text, logprobs, finish_reason },
    ],
    usage,
  });
}

function count(metrics: ServerMetrics, model: string, usage: Usage): void {
  metrics.promptTokens.add({ model }, usage.prompt_tokens);
  metrics.completionTokens.add({ model }, usage.completion_tokens);
}

async function streamAnswer(
  kind: Kind,
  target: Served,
  request: ChatRequest | TextRequest,
  res: ServerResponse,
  tokens: AsyncIterable<Token>,
  meta: { id: string; created: number; echo: string },
  metrics: ServerMetrics,
): Promise<void> {
  const sse = new SseWriter(res);
  const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    id: meta.id,
    object,
    created: meta.created,
    model: target.name,
    choices: [choice],
    ...extra,
  });
  const wantsLogprobs = request.options.logprobs !== undefined;
  // Characters sent so far, where the next legacy chunk's text_offset starts.
  let sentChars = 0;
  const logprobsOf = (tokens: Token[]) => {
    if (!wantsLogprobs) return null;
    if (kind === "chat") return { content: chatLogprobEntries(tokens), refusal: null };
    const legacy = legacyLogprobs(tokens, sentChars);
    sentChars += tokens.reduce((n, t) => n + characterCount(t.text), 0);
    return legacy;
  };
  const delta = (content: string | undefined, finish: string | null, tokens: Token[] = [], first = false) => {
    const logprobs = tokens.length > 0 ? logprobsOf(tokens) : null;
    return kind === "chat"
      ? { index: 0, delta: first ? { role: "assistant", content: "" } : content === undefined ? {} : { content }, logprobs, finish_reason: finish }
      : { index: 0, text: content ?? "", logprobs, finish_reason: finish };
  };

  sse.open();
  if (kind === "chat") sse.send(chunk(delta("", null, [], true)));
  if (meta.echo) sse.send(chunk(delta(meta.echo, null)));
  let generated = 0;
  // Tokens that add no text (the first bytes of a split character) wait to be reported with the next chunk that has text.
  let unsent: Token[] = [];
  try {
    for await (const token of tokens) {
      generated++;
      unsent.push(token);
      if (!token.text) continue;
      sse.send(chunk(delta(unsent.map((t) => t.text).join(""), null, wantsLogprobs ? unsent : [])));
      unsent = [];
    }
  } catch (error) {
    if (isInferenceError(error, "ABORTED") || sse.closed) return;
    // Headers are sent: report the failure in-band the way OpenAI's clients read it.
    sse.send(toHttpError(error).body());
    res.end();
    return;
  }
  // A token stream does not say why it ended; reaching maxTokens is the one "length" it can tell.
  const reason = request.options.maxTokens !== undefined && generated >= request.options.maxTokens ? "length" : "stop";
  sse.send(chunk(delta(undefined, reason, wantsLogprobs ? unsent : [])));
  const usage = usageOf(target.model, generated);
  count(metrics, target.name, usage);
  if (request.includeUsage) sse.send({ id: meta.id, object, created: meta.created, model: target.name, choices: [], usage });
  sse.done();
}
