import type { Token } from "@infer/core";

/** What the detokenizer needs from node-llama-cpp's model. */
export interface Detokenizer {
  detokenize(tokens: readonly number[], specialTokens?: boolean, lastTokens?: readonly number[]): string;
}

const REPLACEMENT_CHARACTER = "\uFFFD";
/** Enough preceding tokens for SentencePiece/BPE spacing rules to see their context. */
const CONTEXT_TOKENS = 4;
/** A UTF-8 character spans at most 4 byte tokens; past that a U+FFFD is real. */
const MAX_HELD_TOKENS = 4;

/**
 * Turns generated ids into the text each one adds. Text is computed as the
 * difference of decoding with and without the new tokens (with a few preceding
 * tokens as context), so spacing matches decoding the whole sequence. Tokens
 * that end inside a UTF-8 character are held and the token completing the
 * character carries the whole of it; the held ones get "".
 *
 * Control tokens (a BOS the model emits mid-stream, ...) add no text: they
 * are detokenized without special-token text, as llama.cpp prints them only
 * when asked. `decode(ids)` still spells them unless told to skip them.
 */
export class TokenTextStream {
  private readonly history: number[] = [];
  private held: number[] = [];

  constructor(private readonly model: Detokenizer) {}

  /** The tokens to emit for `id`: usually one; several when held tokens are released. */
  push(id: number): Token[] {
    this.held.push(id);
    const context = this.history.slice(-CONTEXT_TOKENS);
    const text = this.model.detokenize(this.held, false, context);
    if (text.endsWith(REPLACEMENT_CHARACTER) && this.held.length < MAX_HELD_TOKENS) return [];
    return this.release(text);
  }

  /** Releases whatever is held (end of the sequence). */
  flush(): Token[] {
    if (this.held.length === 0) return [];
    const text = this.model.detokenize(this.held, false, this.history.slice(-CONTEXT_TOKENS));
    return this.release(text);
  }

  private release(text: string): Token[] {
    const out = this.held.map((heldId, i) => ({ id: heldId, text: i === this.held.length - 1 ? text : "" }));
    this.history.push(...this.held);
    if (this.history.length > CONTEXT_TOKENS * 4) this.history.splice(0, this.history.length - CONTEXT_TOKENS);
    this.held = [];
    return out;
  }
}
