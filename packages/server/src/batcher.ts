import { abortedError, type BatchResult, type GenerateOptions, type TextModel } from "@infer/core";
import type { SlotQueue } from "./queue.js";

interface BatchItem {
  prompt: string;
  /**
   * Requests batch together only when their options are equal: the batch runs
   * with one options object, so a request for logprobs (or another count of
   * alternatives) never rides in a batch that was not asked for them.
   */
  key: string;
  options: GenerateOptions;
  signal: AbortSignal;
  resolve: (result: BatchResult) => void;
  reject: (error: unknown) => void;
}

/** An AbortSignal that fires once every one of `signals` has. */
function allAborted(signals: AbortSignal[]): AbortSignal {
  const controller = new AbortController();
  const check = () => {
    if (signals.every((s) => s.aborted)) controller.abort(new Error("every client of the batch disconnected"));
  };
  for (const s of signals) s.addEventListener("abort", check, { once: true });
  check();
  return controller.signal;
}

/**
 * Gathers non-streaming text completions for one model and decodes those
 * that wait together with `batchGenerate`, which backends run as one batch.
 * The first request starts at once; whatever arrives while a batch runs forms
 * the next one. A batch takes one slot of the model's queue.
 */
export class Batcher {
  private readonly pending: BatchItem[] = [];
  private draining = false;
  /** Sizes of the batches run so far (for metrics and tests). */
  readonly batchSizes: number[] = [];

  constructor(
    private readonly model: TextModel,
    private readonly queue: SlotQueue,
    private readonly maxBatch: number,
    private readonly onBatch?: (size: number) => void,
  ) {}

  submit(prompt: string, options: GenerateOptions, signal: AbortSignal): Promise<BatchResult> {
    if (signal.aborted) return Promise.reject(abortedError(signal.reason));
    this.queue.checkRoom();
    return new Promise<BatchResult>((resolve, reject) => {
      const item: BatchItem = { prompt, key: JSON.stringify(options), options, signal, resolve, reject };
      signal.addEventListener(
        "abort",
        () => {
          const at = this.pending.indexOf(item);
          if (at < 0) return; // already in a running batch; it ends when all of its clients are gone
          this.pending.splice(at, 1);
          this.queue.heldElsewhere--;
          reject(abortedError(signal.reason));
        },
        { once: true },
      );
      this.pending.push(item);
      this.queue.heldElsewhere++;
      void this.drain();
    });
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.pending.length > 0) {
        const release = await this.queue.acquire(new AbortController().signal, true);
        const key = this.pending[0]?.key;
        const batch: BatchItem[] = [];
        for (let i = 0; i < this.pending.length && batch.length < this.maxBatch; ) {
          if (this.pending[i]!.key === key) batch.push(...this.pending.splice(i, 1));
          else i++;
        }
        this.queue.heldElsewhere -= batch.length;
        try {
          if (batch.length > 0) await this.run(batch);
        } finally {
          release();
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private async run(batch: BatchItem[]): Promise<void> {
    this.batchSizes.push(batch.length);
    this.onBatch?.(batch.length);
    try {
      const signal = allAborted(batch.map((b) => b.signal));
      const results = await this.model.batchGenerate(
        batch.map((b) => b.prompt),
        { ...batch[0]!.options, signal },
      );
      batch.forEach((item, i) => {
        const result = results[i];
        if (!result) item.reject(new Error("the backend returned fewer batch results than prompts"));
        else if (result.error) item.reject(result.error);
        else item.resolve(result);
      });
    } catch (error) {
      for (const item of batch) item.reject(error);
    }
  }
}
