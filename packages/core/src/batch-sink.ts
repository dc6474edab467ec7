import { InferenceError, isInferenceError, toInferenceError } from "./errors.js";
import { SequenceStopper } from "./stops.js";
import type { BatchResult, FinishReason, Token } from "./types.js";

/**
 * Where a backend's batch decoding hands each sequence's tokens and its end.
 * The backend only decodes; stop strings and `maxTokens` are applied behind
 * the sink, once per sequence, and the results are built from what it releases.
 */
export interface BatchSink {
  /**
   * Sequence `index`'s next generated token. Returns false once the sequence
   * is over (a stop string, `maxTokens`): the backend decodes it no further.
   */
  token(index: number, token: Token): boolean;
  /**
   * Sequence `index` ended by itself: "stop" (EOS, a stop token), "length"
   * (`maxTokens`, the end of the context), "abort" (the signal fired), or
   * "error" with its `error`. Ignored for a sequence already over.
   */
  end(index: number, reason: FinishReason, error?: unknown): void;
}

/** What `BatchCollector` reports: each released token, and each sequence's result once. */
export interface BatchListener {
  onToken(index: number, token: Token): void;
  onFinish(index: number, result: BatchResult): void;
}

/**
 * The `BatchSink` behind a batch: one `SequenceStopper` per sequence (its stop
 * strings and `maxTokens`), the tokens it releases, and each sequence's
 * result, reported to the listener as soon as the sequence is over.
 */
export class BatchCollector implements BatchSink {
  private readonly stoppers: SequenceStopper[];
  private readonly released: Token[][];
  private readonly over: boolean[];

  constructor(
    stopsOf: { maxTokens?: number; stopStrings?: string[] }[],
    private readonly listener: BatchListener,
  ) {
    this.stoppers = stopsOf.map((stops) => new SequenceStopper(stops));
    this.released = stopsOf.map(() => []);
    this.over = stopsOf.map(() => false);
  }

  token(index: number, token: Token): boolean {
    if (this.over[index] !== false) return false;
    const stopper = this.stoppers[index]!;
    this.release(index, stopper.push(token));
    if (stopper.done) this.finish(index, stopper.done);
    return !this.over[index];
  }

  end(index: number, reason: FinishReason, error?: unknown): void {
    if (this.over[index] !== false) return;
    // Text held back as a possible stop string's start is text after all, unless the sequence broke off.
    if (reason === "stop" || reason === "length") this.release(index, this.stoppers[index]!.flush());
    this.finish(index, reason, error);
  }

  /** Ends the sequences the backend left open: "abort" after the signal fired, else an INTERNAL error. */
  endUnfinished(aborted: boolean, backend: string): void {
    this.over.forEach((over, index) => {
      if (over) return;
      if (aborted) this.end(index, "abort");
      else this.end(index, "error", new InferenceError("INTERNAL", `backend ${backend} ended its batch without ending sequence ${index}`));
    });
  }

  private release(index: number, tokens: Token[]): void {
    for (const token of tokens) {
      this.released[index]!.push(token);
      this.listener.onToken(index, token);
    }
  }

  private finish(index: number, finishReason: FinishReason, error?: unknown): void {
    this.over[index] = true;
    const tokens = this.released[index]!;
    const result: BatchResult = { tokens, text: tokens.map((t) => t.text).join(""), finishReason };
    if (finishReason === "error") result.error = toInferenceError(error);
    this.listener.onFinish(index, result);
  }
}

/**
 * Decodes one sequence of a batch from a token stream (a backend's
 * single-sequence decoder): hands each token to `sink` until the stream ends
 * or the sink has had enough, closes the stream, and ends the sequence with
 * the stream's reason, "abort" on ABORTED, or "error".
 */
export async function decodeInto(
  sink: BatchSink,
  index: number,
  open: () => Promise<AsyncGenerator<Token, FinishReason | void, undefined>>,
): Promise<void> {
  let stream: AsyncGenerator<Token, FinishReason | void, undefined> | undefined;
  try {
    stream = await open();
    for (;;) {
      const step = await stream.next();
      if (step.done) return sink.end(index, step.value ?? "stop");
      if (!sink.token(index, step.value)) return;
    }
  } catch (error) {
    if (isInferenceError(error, "ABORTED")) sink.end(index, "abort");
    else sink.end(index, "error", error);
  } finally {
    await stream?.return(undefined);
  }
}
