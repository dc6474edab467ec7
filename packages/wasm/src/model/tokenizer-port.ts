import type { Message } from "@infer/core";

/** What the model layer needs from a tokenizer (the tokenizer module provides it). */
export interface ModelTokenizer {
  readonly bosId: number | undefined;
  readonly eosIds: number[];
  readonly vocabSize: number;
  encode(text: string, options: { addSpecialTokens: boolean }): number[];
  decode(ids: number[], options: { skipSpecialTokens?: boolean }): string;
  /** Renders messages with the model's template (or `chatTemplate`); throws NO_CHAT_TEMPLATE when there is none. */
  renderChat(messages: Message[], options: { addGenerationPrompt: boolean; chatTemplate?: string }): string;
  /** A fresh per-sequence streaming decoder; `skipSpecialTokens` leaves control tokens' text out. */
  streamDecoder(options?: { skipSpecialTokens?: boolean }): { push(id: number): string };
}
