import type { FinishReason, Token, TokenLogprob } from "@infer/core";
import { remoteError, statusFailure } from "./failures.js";

type Json = Record<string, unknown>;

/** Server-side counts and times of one request (llama-server's `timings`, anyone's `usage`). */
export interface ServerCounts {
  promptTokens?: number;
  /** Prompt tokens taken from the server's cache (not evaluated again). */
  cachedTokens?: number;
  promptMs?: number;
  predictedMs?: number;
}

/** One answer (a streamed chunk or a whole response) read into the contract's terms. */
export interface ParsedChoice {
  tokens: Token[];
  finish?: FinishReason;
  counts: ServerCounts;
}

const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/**
 * Reads one completion or chat answer, streamed or whole: the text, the token
 * ids the server reported (llama-server's per-token `id`, vLLM's
 * `token_ids`), log-probabilities when `logprobs` was asked, the finish reason
 * and counts. A token the server gives no id for has id -1. An `error` in the
 * answer throws, typed like an HTTP error.
 */
export function parseAnswer(event: unknown, url: string, logprobs: number | undefined): ParsedChoice {
  if (typeof event !== "object" || event === null) throw remoteError(url, `an answer is not a JSON object: ${JSON.stringify(event)}`);
  const e = event as Json;
  if (e.error !== undefined) {
    const error = e.error as Json;
    const status = num(error?.code) ?? 500;
    throw statusFailure(url, status >= 400 && status < 600 ? status : 500, e, JSON.stringify(e.error));
  }
  const counts = countsOf(e);
  const choices = e.choices;
  if (!Array.isArray(choices)) throw remoteError(url, `an answer has no 'choices' array: ${JSON.stringify(e).slice(0, 200)}`);
  const choice = choices[0] as Json | undefined;
  if (!choice) return { tokens: [], counts };
  const delta = (choice.delta ?? choice.message) as Json | undefined;
  const text = typeof choice.text === "string" ? choice.text : typeof delta?.content === "string" ? delta.content : "";
  const entries = logprobEntries(choice.logprobs);
  const ids = Array.isArray(choice.token_ids) ? (choice.token_ids as unknown[]).filter((x) => typeof x === "number") as number[] : entries.map((entry) => entry.id);
  const tokens = tokensOf(text, ids, entries, logprobs);
  const finish = finishOf(choice.finish_reason);
  return { tokens, ...(finish ? { finish } : {}), counts };
}

interface Entry {
  id: number;
  text: string;
  logprob?: number;
  top: TokenLogprob[];
}

/** `logprobs.content` (OpenAI chat, llama-server for both endpoints) or the legacy completion arrays. */
function logprobEntries(logprobs: unknown): Entry[] {
  if (typeof logprobs !== "object" || logprobs === null) return [];
  const lp = logprobs as Json;
  if (Array.isArray(lp.content)) {
    return (lp.content as Json[]).map((c) => ({
      id: num(c.id) ?? -1,
      text: typeof c.token === "string" ? c.token : "",
      logprob: num(c.logprob),
      top: Array.isArray(c.top_logprobs)
        ? (c.top_logprobs as Json[]).map((t) => ({ id: num(t.id) ?? -1, text: String(t.token ?? ""), logprob: num(t.logprob) ?? -Infinity }))
        : [],
    }));
  }
  if (Array.isArray(lp.tokens)) {
    const tops = Array.isArray(lp.top_logprobs) ? lp.top_logprobs : [];
    return (lp.tokens as unknown[]).map((t, i) => ({
      id: -1,
      text: String(t),
      logprob: num((lp.token_logprobs as unknown[] | undefined)?.[i]),
      top: Object.entries((tops[i] ?? {}) as Record<string, number>).map(([text, logprob]) => ({ id: -1, text, logprob })),
    }));
  }
  return [];
}

/**
 * The chunk's tokens: one per id; the text goes to each token by its own piece
 * when the pieces add up to it, else whole to the last (the earlier ones carry
 * "", like the bytes of a split character).
 */
function tokensOf(text: string, ids: number[], entries: Entry[], logprobs: number | undefined): Token[] {
  if (ids.length === 0) return text.length > 0 ? [{ id: -1, text }] : [];
  const pieces = entries.length === ids.length && entries.map((e) => e.text).join("") === text ? entries.map((e) => e.text) : undefined;
  return ids.map((id, k) => {
    const token: Token = { id, text: pieces ? pieces[k]! : k === ids.length - 1 ? text : "" };
    const entry = entries[k];
    if (logprobs !== undefined && entry?.logprob !== undefined) {
      token.logprob = entry.logprob;
      if (logprobs > 0) token.topLogprobs = entry.top.slice(0, logprobs);
    }
    return token;
  });
}

function finishOf(reason: unknown): FinishReason | undefined {
  if (reason === null || reason === undefined) return undefined;
  return reason === "length" ? "length" : "stop";
}

function countsOf(e: Json): ServerCounts {
  const counts: ServerCounts = {};
  const usage = e.usage as Json | undefined;
  const timings = e.timings as Json | undefined;
  if (timings && typeof timings === "object") {
    const evaluated = num(timings.prompt_n);
    const cached = num(timings.cache_n) ?? 0;
    if (evaluated !== undefined) counts.promptTokens = evaluated + cached;
    counts.cachedTokens = cached;
    counts.promptMs = num(timings.prompt_ms);
    counts.predictedMs = num(timings.predicted_ms);
  }
  if (usage && typeof usage === "object" && num(usage.prompt_tokens) !== undefined) counts.promptTokens = num(usage.prompt_tokens);
  return counts;
}
