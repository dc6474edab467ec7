import type { Message } from "@infer/core";
import { GgufTokenType as TokenKind } from "@infer/formats";

/** Token kinds: GGUF's token types, by which the tokenizer matches and renders tokens. */
export { TokenKind };

export interface EncodeOptions {
  /** Add the BOS / EOS tokens the vocabulary asks for (`addBos` / `addEos`). Default true. */
  addSpecialTokens?: boolean;
  /**
   * Match control-token text such as "<|im_start|>" in the input as the token
   * itself (llama.cpp's parse_special; Hugging Face always does). Default true.
   * User-defined tokens are matched either way.
   */
  parseSpecial?: boolean;
}

export interface DecodeOptions {
  /** Leave out control and unknown tokens. Default false. */
  skipSpecialTokens?: boolean;
}

export interface ChatRenderOptions {
  addGenerationPrompt?: boolean;
  /** A template to use instead of the tokenizer's own. */
  chatTemplate?: string;
  /** Extra variables for the template (tools, enable_thinking, ...). */
  extra?: Record<string, unknown>;
}

/** Decodes one sequence token by token; see `StreamDecoder`. */
export interface TokenStream {
  /** The text this token completes ("" while a UTF-8 character is still partial). */
  push(id: number): string;
  /** The text still held back (an incomplete character becomes U+FFFD, as `decode` renders it). */
  flush(): string;
}

export interface Tokenizer {
  /** Where the vocabulary came from (a file path or a description), for messages. */
  readonly source: string;
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  /** The EOS token itself (what `addEos` appends). */
  readonly eosId: number | undefined;
  /** Every id that ends generation (eos, eot, eom, and the generation config's list). */
  readonly eosIds: number[];
  /** Whether `encode` puts BOS first / EOS last when adding special tokens. */
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** The Jinja chat template shipped with the model, if any. */
  readonly chatTemplate: string | undefined;
  encode(text: string, options?: EncodeOptions): number[];
  decode(ids: readonly number[], options?: DecodeOptions): string;
  /** The token's stored text (e.g. "▁the", "Ġthe", "<0x0A>", "<|im_end|>"). */
  tokenText(id: number): string;
  tokenKind(id: number): TokenKind;
  /** Control and unknown tokens: the ones `skipSpecialTokens` leaves out. */
  isSpecial(id: number): boolean;
  isEndOfGeneration(id: number): boolean;
  /** The exact bytes this token contributes to decoded text. */
  tokenBytes(id: number, options?: DecodeOptions): Uint8Array;
  /** A fresh per-sequence streaming decoder. */
  streamDecoder(options?: DecodeOptions): TokenStream;
  /** Renders messages with the model's chat template (or `options.chatTemplate`). */
  renderChat(messages: readonly Message[], options?: ChatRenderOptions): string;
}
