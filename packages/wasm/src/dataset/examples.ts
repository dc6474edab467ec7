/**
 * Records to token ids and loss masks, as Hugging Face trainers build them:
 * lossMask[t] = 1 where the token at t is a target to learn (TrainBatch's
 * meaning). Text learns every token; a completion only its own tokens; a
 * chat only its assistant turns, found by rendering the chat template turn by
 * turn (each prefix must render as the start of the next). The whole text is
 * tokenized at once, as trainers do (pieces tokenized apart would differ:
 * SentencePiece's leading spaces, merges across a boundary); a span starts at
 * the first token its prefix's own tokens do not share, so a token that
 * straddles the start of a completion ("e▁was▁" + "Zorblat") is learned.
 */
import { InferenceError, isInferenceError, type Message } from "@infer/core";
import type { Tokenizer } from "../tokenizer/types.js";
import { dataError, type DataRecord } from "./records.js";

export interface TrainingExample {
  /** The JSONL line it came from. */
  line: number;
  inputIds: number[];
  /** Per position: 1 learns the token there, 0 does not. */
  lossMask: number[];
}

export interface ExampleOptions {
  /** Tokens per example at most; longer ones are cut (default: no limit). */
  maxLength?: number;
  /** End text and completions with the EOS token, so the model learns to stop (default true). */
  appendEos?: boolean;
  /** A chat template instead of the tokenizer's own, for {"messages"} records. */
  chatTemplate?: string;
}

export type ExampleTokenizer = Pick<Tokenizer, "encode" | "eosId" | "renderChat">;

/**
 * Where the tokens of a prefix of a text stop agreeing with the whole text's:
 * the first token that holds text past the prefix (or the prefix's end).
 */
function sharedLength(prefixIds: readonly number[], ids: readonly number[]): number {
  let t = 0;
  while (t < prefixIds.length && t < ids.length && prefixIds[t] === ids[t]) t++;
  return t;
}


export function toExample(record: DataRecord, tokenizer: ExampleTokenizer, file: string, options: ExampleOptions = {}): TrainingExample {
  const eos = options.appendEos !== false && tokenizer.eosId !== undefined ? [tokenizer.eosId] : [];
  let inputIds: number[];
  let lossMask: number[];
  switch (record.kind) {
    case "text":
      inputIds = [...tokenizer.encode(record.text), ...eos];
      lossMask = inputIds.map(() => 1);
      break;
    case "completion": {
      inputIds = [...tokenizer.encode(record.prompt + record.completion), ...eos];
      const from = sharedLength(tokenizer.encode(record.prompt), inputIds);
      lossMask = inputIds.map((_, t) => (t < from ? 0 : 1));
      break;
    }
    case "chat":
      ({ inputIds, lossMask } = chatExample(record.messages, tokenizer, options.chatTemplate, file, record.line));
      break;
  }
  const limit = options.maxLength ?? Infinity;
  return { line: record.line, inputIds: inputIds.slice(0, limit), lossMask: lossMask.slice(0, limit) };
}

function chatExample(
  messages: Message[],
  tokenizer: ExampleTokenizer,
  chatTemplate: string | undefined,
  file: string,
  line: number,
): { inputIds: number[]; lossMask: number[] } {
  const render = (upTo: number, addGenerationPrompt: boolean): string => {
    try {
      return tokenizer.renderChat(messages.slice(0, upTo), { addGenerationPrompt, chatTemplate });
    } catch (error) {
      // The template's own code and words, with the line they were rendering.
      if (!isInferenceError(error)) throw error;
      throw new InferenceError(error.code, `${file}:${line}: ${error.message}`, { cause: error, details: { ...error.details, file, line } });
    }
  };
  // The template adds the special tokens it wants (BOS included), as chat trainers tokenize.
  const encode = (text: string) => tokenizer.encode(text, { addSpecialTokens: false });
  const whole = render(messages.length, false);
  const inputIds = encode(whole);
  const lossMask = inputIds.map(() => 0);
  /** The token index in the whole chat where a rendered prefix of it ends. */
  const boundary = (prefix: string): number => {
    if (!whole.startsWith(prefix)) {
      throw dataError(file, line, "the chat template does not render each turn as the start of the next, so assistant turns cannot be told apart", "messages");
    }
    return sharedLength(encode(prefix), inputIds);
  };
  messages.forEach((message, i) => {
    if (message.role === "assistant") lossMask.fill(1, boundary(render(i, true)), boundary(render(i + 1, false)));
  });
  return { inputIds, lossMask };
}
