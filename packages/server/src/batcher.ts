import {
  abortedError,
  type BatchPrompt,
  type BatchResult,
  type FinishReason,
  type GenerateOptions,
  isTokenizerModel,
  type TextModel,
  type Token,
} from "@infer/core";
import type { SlotQueue } from "./queue.js";

/** One completion request handed to the batcher. */
export interface BatchRequest {
  /** Text, or chat messages the model renders with its template. */
  prompt: BatchPrompt;
  options: GenerateOptions;
  /** The client's signal: it fires when the client disconnects. */
  signal: AbortSignal;
  /** Receives the request's tokens as the model releases them (after its own maxTokens and stop strings). */
  onToken?: (token: Token) => void;
}

/** How one request of a batch ended. */
export interface BatchOutcome {
  tokens: Token[];
  /** "abort" when the client disconnected while its batch ran. */
  finishReason: FinishReason;
  /** Prompt tokens of this request; 0 when they cannot be told (see `promptTokensOf`). */
  promptTokens: number;
  /** Of those, the ones the model reused from its cache; known for a request alone in its batch. */
  cachedPromptTokens?: number;
}

/**
 * Options each request keeps to itself, whatever batch it rides in: each
 * request's stop strings go to `batchGenerate` as that prompt's own
 * (`promptStopStrings`), so they need not be equal for requests to share a
 * batch. `maxTokens` must be: a backend ends a sequence at its limit by
 * flushing a character left incomplete into the last token's text (wasm
 * does), which no later cut can reproduce.
 */
const PER_REQUEST: ReadonlySet<string> = new Set(["stopStrings", "signal"]);

/**
 * The grouping key: the options `batchGenerate` applies to the whole batch
 * (sampling, seed, maxTokens, logprobs, constraints). Requests batch together
 * only when these are equal, so nobody is decoded with someone else's settings.
 */
export function batchKey(options: GenerateOptions): string {
  const shared = Object.entries(options)
    .filter(([name, value]) => value !== undefined && !PER_REQUEST.has(name))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(shared);
}

/** One request while it waits and while its batch runs. It settles the request's promise exactly once. */
class Member {
  readonly key: string;
  readonly tokens: Token[] = [];
  /** Set once the request is over for its client, whether or not its batch still decodes it. */
  finished: FinishReason | undefined;
  promptTokens = 0;
  cachedPromptTokens: number | undefined;

  constructor(
    readonly request: BatchRequest,
    private readonly resolve: (outcome: BatchOutcome) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.key = batchKey(request.options);
  }

  /** Passes a released token on; a listener that throws fails only its own request. */
  release(token: Token): void {
    if (this.finished) return;
    this.tokens.push(token);
    try {
      this.request.onToken?.(token);
    } catch (error) {
      this.fail(error);
    }
  }

  finish(reason: FinishReason): void {
    if (this.finished) return;
    this.finished = reason;
    this.resolve({ tokens: this.tokens, finishReason: reason, promptTokens: this.promptTokens, cachedPromptTokens: this.cachedPromptTokens });
  }

  fail(error: unknown): void {
    if (this.finished) return;
    this.finished = "error";
    this.reject(error);
  }
}

/**
 * Gathers one model's completion requests (chat and text, streaming or not)
 * and decodes those that wait together with one `batchGenerate` call, which
 * backends run as one batch taking one slot of the model's queue. The first
 * request starts at once; whatever arrives while the slots are busy forms the
 * next batches, grouped by `batchKey`, at most `maxBatch` each.
 *
 * The model applies each request's stop strings and `maxTokens` (as
 * `generate` does) and reports each prompt's end through `onFinish` as soon
 * as it comes, ending that prompt's decoding too; the request ends for its
 * client then. `batchGenerate` has one signal for the whole batch, so a
 * request whose client disconnected is still decoded (its tokens dropped)
 * until the batch ends; once every request of a batch is over, the batch is
 * aborted.
 */
export class Batcher {
  private readonly pending: Member[] = [];
  private draining = false;
  /** Sizes of the batches run so far (for metrics and tests). */
  readonly batchSizes: number[] = [];

  constructor(
    private readonly model: TextModel,
    private readonly queue: SlotQueue,
    private readonly maxBatch: number,
    private readonly onBatch?: (size: number) => void,
    /** Used for chat prompts instead of the model's own template. */
    private readonly chatTemplate?: string,
  ) {}

  submit(request: BatchRequest): Promise<BatchOutcome> {
    const { signal } = request;
    if (signal.aborted) return Promise.reject(abortedError(signal.reason));
    this.queue.checkRoom();
    return new Promise<BatchOutcome>((resolve, reject) => {
      const member = new Member(request, resolve, reject);
      signal.addEventListener("abort", () => this.disconnect(member), { once: true });
      this.pending.push(member);
      this.queue.heldElsewhere++;
      void this.drain();
    });
  }

  private disconnect(member: Member): void {
    const at = this.pending.indexOf(member);
    if (at >= 0) {
      this.pending.splice(at, 1);
      this.queue.heldElsewhere--;
      member.fail(abortedError(member.request.signal.reason));
      return;
    }
    // Running: its remaining tokens are dropped; the batch learns of it through its own signal.
    member.finish("abort");
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.pending.length > 0) {
        const release = await this.queue.acquire(new AbortController().signal, true);
        const batch = this.takeBatch();
        if (batch.length === 0) {
          release();
          continue;
        }
        // Not awaited: with several slots, the next batch may start while this one runs.
        void this.run(batch).finally(release);
      }
    } finally {
      this.draining = false;
    }
  }

  /** The oldest waiting request and those after it with the same key, up to `maxBatch`. */
  private takeBatch(): Member[] {
    const key = this.pending[0]?.key;
    const batch: Member[] = [];
    for (let i = 0; i < this.pending.length && batch.length < this.maxBatch; ) {
      if (this.pending[i]!.key === key) batch.push(...this.pending.splice(i, 1));
      else i++;
    }
    this.queue.heldElsewhere -= batch.length;
    return batch;
  }

  private async run(batch: Member[]): Promise<void> {
    this.batchSizes.push(batch.length);
    this.onBatch?.(batch.length);
    for (const member of batch) member.promptTokens = promptTokensOf(this.model, member.request.prompt, this.chatTemplate);
    const controller = new AbortController();
    // Prompts the model ended whose requests are settled only when the batch returns.
    const ended = new Map<Member, BatchResult>();
    const abortWhenAllOver = () => {
      const over = batch.every((m) => m.finished || ended.has(m));
      if (over && !controller.signal.aborted) controller.abort(new Error("every request of the batch is over"));
    };
    for (const member of batch) member.request.signal.addEventListener("abort", abortWhenAllOver, { once: true });
    abortWhenAllOver();
    const onToken = (index: number, token: Token) => batch[index]?.release(token);
    const alone = batch.length === 1;
    // A prompt's own end (a stop string, EOS, max_tokens, the context) closes its request at once, not when the batch ends.
    const onFinish = (index: number, result: BatchResult) => {
      const member = batch[index];
      if (!member || member.finished) return;
      // A request alone in its batch is settled when the batch returns: it may still need the model's metrics.
      if (alone) ended.set(member, result);
      else settle(member, result, alone);
      abortWhenAllOver();
    };
    let results: BatchResult[];
    try {
      results = await this.model.batchGenerate(
        batch.map((m) => m.request.prompt),
        // No stop strings for the whole batch: each request's own are its prompt's.
        {
          ...batch[0]!.request.options,
          stopStrings: undefined,
          promptStopStrings: batch.map((m) => m.request.options.stopStrings),
          chatTemplate: this.chatTemplate,
          signal: controller.signal,
          onToken,
          onFinish,
        },
      );
    } catch (error) {
      for (const member of batch) {
        const result = ended.get(member);
        if (result) settle(member, result, alone, this.model);
        else member.fail(error);
      }
      return;
    } finally {
      for (const member of batch) member.request.signal.removeEventListener("abort", abortWhenAllOver);
    }
    batch.forEach((member, i) => {
      if (member.finished) return;
      // What the model reported when the prompt ended, not what an abort of the batch made of it since.
      const result = ended.get(member) ?? results[i];
      if (!result) return member.fail(new Error("the backend returned fewer batch results than prompts"));
      settle(member, result, alone, this.model);
    });
  }
}

/** Ends a request with its prompt's batch result. */
function settle(member: Member, result: BatchResult, alone: boolean, model?: TextModel): void {
  if (result.error) return member.fail(result.error);
  // Without a tokenizer, a request alone in its batch can still read its prompt size from the model's metrics
  // (known only once the batch has returned).
  if (alone && member.promptTokens === 0 && model) member.promptTokens = model.metrics().promptTokens;
  // A batch's metrics sum its prompts: a request's own share of reused tokens is known only when it ran alone.
  if (alone && model) member.cachedPromptTokens = model.metrics().cachedPromptTokens;
  member.finish(result.finishReason);
}

/**
 * Prompt tokens counted with the model's tokenizer, when it exposes one. A
 * rendered chat template usually starts with BOS itself; encoding adds another,
 * which backends drop, so it is not counted. Without a tokenizer, 0: the
 * batch's metrics sum all of its prompts.
 */
function promptTokensOf(model: TextModel, prompt: BatchPrompt, chatTemplate: string | undefined): number {
  if (!isTokenizerModel(model)) return 0;
  try {
    if (typeof prompt === "string") return model.encode(prompt).length;
    const ids = model.encode(model.applyChatTemplate(prompt, { addGenerationPrompt: true, chatTemplate }));
    const [bos] = model.encode("");
    return bos !== undefined && ids[0] === bos && ids[1] === bos ? ids.length - 1 : ids.length;
  } catch {
    // The batch reports this prompt's failure itself.
    return 0;
  }
}
