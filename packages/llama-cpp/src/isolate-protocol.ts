// The messages between an isolated model (isolate-model.ts, in the caller's process) and the child
// process that runs llama.cpp (isolate-child.ts). They travel over Node's IPC channel with "advanced"
// serialization (the structured clone), so typed arrays (classify logits, embeddings) pass as they are.
import {
  type ClassifyOptions,
  type ClassifyResult,
  type ErrorCode,
  type FinishReason,
  type GenerateMetrics,
  InferenceError,
  type LoadOptions,
  type Message,
  type ModelInfo,
  type ProbeEvent,
  type ProbeKind,
  type PromptInput,
  type ResolvedGenerateOptions,
  type Token,
} from "@infer/core";

/** Load options that can cross to the child: a probe sink cannot (events come back instead), and the child is not isolated again. */
export type ChildLoadOptions = Omit<LoadOptions, "probe" | "isolate">;

/** Call options without the signal, which cannot cross (the parent sends `stop` instead). */
export type PortableGenerateOptions = Omit<ResolvedGenerateOptions, "signal">;

/** One call the child runs, in the order the parent's model queued it. */
export type CallRequest =
  | { kind: "stream"; input: PromptInput; options: PortableGenerateOptions }
  | { kind: "batch"; inputs: PromptInput[]; options: PortableGenerateOptions }
  | { kind: "classify"; prompts: string[]; options: Omit<ClassifyOptions, "signal"> }
  | { kind: "embed"; texts: string[]; normalize?: boolean }
  | { kind: "render"; messages: Message[]; chatTemplate?: string };

/** What each call's `done` message carries as its value. */
export interface CallValues {
  stream: FinishReason;
  batch: undefined;
  classify: ClassifyResult[];
  embed: Float32Array[];
  render: string;
}

export type ParentMessage =
  | { type: "load"; path: string; options: ChildLoadOptions }
  /** Starts a call; a stream's first token is asked for by this message. `probeKinds`: what the parent's sinks want. */
  | { type: "call"; id: number; request: CallRequest; probeKinds: ProbeKind[] }
  /** A stream's consumer asked for the next token: the child decodes one token per `next`, never ahead. */
  | { type: "next"; id: number }
  /** Ends the call now (aborted, or its stream was closed early). */
  | { type: "stop"; id: number }
  | { type: "close" };

export type ChildMessage =
  | { type: "loaded"; info: ModelInfo }
  | { type: "load-failed"; error: PortableError }
  /** A stream's next token, or (with `index`) a batch sequence's. */
  | { type: "token"; id: number; token: Token; index?: number }
  /** Batch sequence `index` ended by itself. */
  | { type: "end"; id: number; index: number; reason: FinishReason; error?: PortableError }
  | { type: "probe"; id: number; event: ProbeEvent }
  | { type: "done"; id: number; value: unknown; metrics: GenerateMetrics }
  | { type: "failed"; id: number; error: PortableError; metrics: GenerateMetrics };

/** An InferenceError as it crosses the channel: the code, message and details survive; the cause stays behind. */
export interface PortableError {
  code: ErrorCode;
  message: string;
  details: Record<string, unknown>;
}

export function toPortableError(error: unknown): PortableError {
  if (error instanceof InferenceError) {
    return { code: error.code, message: error.message, details: structuredCloneable(error.details) ? error.details : {} };
  }
  return { code: "INTERNAL", message: error instanceof Error ? error.message : String(error), details: {} };
}

export function fromPortableError(error: PortableError): InferenceError {
  return new InferenceError(error.code, error.message, { details: error.details });
}

function structuredCloneable(value: unknown): boolean {
  try {
    structuredClone(value);
    return true;
  } catch {
    return false;
  }
}
