import type { ServerResponse } from "node:http";
import type { FinishReason, Token } from "@infer/core";
import { toHttpError } from "./errors.js";
import { SseWriter } from "./http-io.js";
import { characterCount, chatLogprobEntries, legacyLogprobs } from "./logprobs.js";

export type Kind = "chat" | "text";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** OpenAI's field for prompt tokens served from a cache: here those the model's prefix reuse did not evaluate. */
  prompt_tokens_details?: { cached_tokens: number };
}

/** OpenAI knows "stop" and "length"; an abort only happens when nobody is listening. */
export function openAIFinish(reason: FinishReason): "stop" | "length" {
  return reason === "length" ? "length" : "stop";
}

export interface StreamMeta {
  kind: Kind;
  id: string;
  created: number;
  /** The served model's name. */
  model: string;
  /** Text sent before the completion (`echo`), or "". */
  echo: string;
  wantsLogprobs: boolean;
  includeUsage: boolean;
  /** Each chunk's tokens' ids as `token_ids` (see CompletionRequest.returnTokenIds). */
  returnTokenIds: boolean;
}

/**
 * One streamed answer in OpenAI's SSE chunks, fed token by token. The stream
 * opens at the first token (or at the end), so a request that fails before
 * producing anything still gets a proper HTTP error status.
 */
export class CompletionStream {
  private readonly sse: SseWriter;
  private opened = false;
  /** Tokens that add no text (the first bytes of a split character) wait for the next chunk with text. */
  private unsent: Token[] = [];
  /** Characters sent so far, where the next legacy chunk's text_offset starts. */
  private sentChars = 0;
  /** Tokens received so far. */
  generated = 0;

  constructor(
    res: ServerResponse,
    private readonly meta: StreamMeta,
  ) {
    this.sse = new SseWriter(res);
  }

  get started(): boolean {
    return this.opened;
  }

  get closed(): boolean {
    return this.sse.closed;
  }

  token(token: Token): void {
    this.open();
    this.generated++;
    this.unsent.push(token);
    if (!token.text) return;
    this.sse.send(this.chunk(this.unsent.map((t) => t.text).join(""), null, this.unsent));
    this.unsent = [];
  }

  /** The final chunk, the usage chunk when asked, and [DONE]. */
  finish(reason: "stop" | "length", usage: Usage): void {
    this.open();
    this.sse.send(this.chunk(undefined, reason, this.unsent));
    this.unsent = [];
    if (this.meta.includeUsage) this.sse.send({ ...this.envelope(), choices: [], usage });
    this.sse.done();
  }

  /** Reports a failure in-band, the way OpenAI's clients read it once headers are sent. */
  fail(error: unknown): void {
    this.sse.send(toHttpError(error).body());
    this.sse.end();
  }

  private open(): void {
    if (this.opened) return;
    this.opened = true;
    this.sse.open();
    if (this.meta.kind === "chat") this.sse.send(this.chunk("", null, [], true));
    if (this.meta.echo) this.sse.send(this.chunk(this.meta.echo, null, []));
  }

  private envelope() {
    const object = this.meta.kind === "chat" ? "chat.completion.chunk" : "text_completion";
    return { id: this.meta.id, object, created: this.meta.created, model: this.meta.model };
  }

  private chunk(content: string | undefined, finish: string | null, tokens: Token[], first = false) {
    const logprobs = this.meta.wantsLogprobs && tokens.length > 0 ? this.logprobsOf(tokens) : null;
    const choice =
      this.meta.kind === "chat"
        ? { index: 0, delta: first ? { role: "assistant", content: "" } : content === undefined ? {} : { content }, logprobs, finish_reason: finish }
        : { index: 0, text: content ?? "", logprobs, finish_reason: finish };
    return { ...this.envelope(), choices: [this.meta.returnTokenIds ? { ...choice, token_ids: tokens.map((t) => t.id) } : choice] };
  }

  private logprobsOf(tokens: Token[]) {
    if (this.meta.kind === "chat") return { content: chatLogprobEntries(tokens), refusal: null };
    const legacy = legacyLogprobs(tokens, this.sentChars);
    this.sentChars += tokens.reduce((n, t) => n + characterCount(t.text), 0);
    return legacy;
  }
}
