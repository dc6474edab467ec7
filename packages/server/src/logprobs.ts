/**
 * Token log-probabilities in OpenAI's two response shapes: the chat API's
 * `logprobs.content` entries and the legacy completions API's parallel arrays.
 * The model's tokens carry `logprob` and `topLogprobs` when the request asked
 * for them (GenerateOptions.logprobs); these functions only reshape them.
 */
import type { Token } from "@infer/core";

/** One alternative of a chat logprobs entry. */
export interface ChatTopLogprob {
  token: string;
  logprob: number;
  /** The UTF-8 bytes of `token`. */
  bytes: number[];
}

/** One generated token in `choices[].logprobs.content` of a chat completion. */
export interface ChatLogprobEntry extends ChatTopLogprob {
  /** The most likely tokens at this step, most likely first; empty when `top_logprobs` was 0 or absent. */
  top_logprobs: ChatTopLogprob[];
}

/** `choices[].logprobs` of a legacy text completion: four arrays, one element per token. */
export interface LegacyLogprobs {
  tokens: string[];
  /** null for a token the backend reported without a log-probability. */
  token_logprobs: (number | null)[];
  /** Alternatives by token text, most likely first; a text shared by two ids keeps the likelier. */
  top_logprobs: (Record<string, number> | null)[];
  /** Where each token starts in the choice's text, in characters (code points, as OpenAI counts them). */
  text_offset: number[];
}

const utf8 = new TextEncoder();

function bytesOf(text: string): number[] {
  return Array.from(utf8.encode(text));
}

/**
 * Chat entries of `tokens`. A token without a log-probability (a backend may
 * emit the text left over by a partial character at EOS that way) has no entry.
 */
export function chatLogprobEntries(tokens: readonly Token[]): ChatLogprobEntry[] {
  const entries: ChatLogprobEntry[] = [];
  for (const token of tokens) {
    if (token.logprob === undefined) continue;
    entries.push({
      token: token.text,
      logprob: token.logprob,
      bytes: bytesOf(token.text),
      top_logprobs: (token.topLogprobs ?? []).map((alt) => ({ token: alt.text, logprob: alt.logprob, bytes: bytesOf(alt.text) })),
    });
  }
  return entries;
}

/**
 * Legacy logprobs of `tokens`, whose text starts `startOffset` characters into
 * the choice's text (non-zero for the later chunks of a stream).
 */
export function legacyLogprobs(tokens: readonly Token[], startOffset: number): LegacyLogprobs {
  const result: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = startOffset;
  for (const token of tokens) {
    result.tokens.push(token.text);
    result.token_logprobs.push(token.logprob ?? null);
    result.top_logprobs.push(token.logprob === undefined ? null : alternativesByText(token));
    result.text_offset.push(offset);
    offset += characterCount(token.text);
  }
  return result;
}

function alternativesByText(token: Token): Record<string, number> {
  // No prototype, so a token spelled "__proto__" is an ordinary key.
  const byText = Object.create(null) as Record<string, number>;
  for (const alt of token.topLogprobs ?? []) {
    // Most likely first, so the first id to spell a text is the likeliest one.
    if (!Object.hasOwn(byText, alt.text)) byText[alt.text] = alt.logprob;
  }
  return byText;
}

/** Length in code points, the unit of OpenAI's `text_offset`. */
export function characterCount(text: string): number {
  return Array.from(text).length;
}
