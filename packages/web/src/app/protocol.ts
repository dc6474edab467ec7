/**
 * Messages between the page (main.ts) and the worker that runs the model (worker.ts): the model
 * runs off the page's thread, so a long prefill never freezes the page.
 */
import type { Message } from "@infer/core";

/** Where a model comes from: a URL (http(s), or a served model's), or a file the user picked or dropped. */
export type ModelSource = { kind: "url"; url: string; label: string } | { kind: "file"; file: File; label: string };

export interface Settings {
  temperature: number;
  topP: number;
  maxTokens: number;
}

export type PageRequest =
  | { type: "load"; source: ModelSource }
  | { type: "generate"; messages: Message[]; settings: Settings }
  | { type: "stop" };

/** "chat": the model's chat template renders the conversation; "completion": it has none, the text is continued. */
export type AnswerMode = "chat" | "completion";

export interface LoadedModel {
  label: string;
  architecture: string;
  parameters?: number;
  contextLength: number;
  quantBits: number;
  mode: AnswerMode;
  warnings: string[];
}

/** An error as it crosses postMessage (its class does not): the contract's code and message. */
export interface ErrorReport {
  code: string;
  message: string;
  /** Set for errors thrown by the runtime rather than the engine (RangeError, TypeError, ...). */
  name?: string;
}

export interface AnswerStats {
  generatedTokens: number;
  /** From the request to the first token: prefill included. */
  timeToFirstTokenMs: number;
  /** Tokens after the first over the time after the first: decoding speed. */
  tokensPerSecond: number;
  /** "length": max tokens reached; "stop": the model ended; "abort": stopped by the user. */
  finishReason: "stop" | "length" | "abort";
}

export type WorkerReport =
  | { type: "progress"; phase: "download" | "load"; loadedBytes: number; totalBytes?: number }
  | { type: "loaded"; model: LoadedModel }
  | { type: "load-failed"; error: ErrorReport }
  | { type: "token"; text: string }
  | { type: "done"; stats: AnswerStats }
  | { type: "answer-failed"; error: ErrorReport };
