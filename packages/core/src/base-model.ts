import { abortedError, closedError, InferenceError, isInferenceError, toInferenceError } from "./errors.js";
import { type CapabilityId, capabilitiesOf } from "./capabilities.js";
import type { TextModel } from "./model.js";
import {
  type BatchGenerateOptions,
  type BatchPrompt,
  type ClassifyOptions,
  type GenerateOptions,
  type ResolvedGenerateOptions,
  resolveGenerateOptions,
  validateClassifyOptions,
} from "./options.js";
import { BatchCollector, type BatchSink } from "./batch-sink.js";
import { SequenceStopper } from "./stops.js";
import {
  type BatchResult,
  type ClassifyResult,
  emptyMetrics,
  type FinishReason,
  type GenerateMetrics,
  type GenerationResult,
  type Message,
  type ModelInfo,
  type Token,
} from "./types.js";

/** What a backend's `stream` is asked to continue. */
export interface PromptInput {
  /** The prompt text; for chat, the rendered template. */
  text: string;
  /** True when `text` came from a chat template (which usually carries BOS itself). */
  chat: boolean;
  /**
   * In `runBatch`: the stop strings this prompt ends on (its own, else the
   * call's). They are applied behind the sink already; a backend needs them
   * only where it must apply them itself as well (one that decodes in another
   * process, where the sink's answer would come too late).
   */
  stopStrings?: string[];
}

const ROLES = new Set(["system", "user", "assistant", "tool"]);

/**
 * The shared half of every backend's model: option validation, one call at a
 * time, abort and close, `maxTokens` and stop strings, error bookkeeping and the
 * text conveniences. A backend supplies the token stream, chat rendering,
 * classify, batch decoding and cleanup.
 *
 * Stop strings and `maxTokens` are applied here and nowhere else: one
 * `SequenceStopper` per generated sequence, on `stream`'s tokens for
 * `generate`/`chat` and behind the `BatchSink` for `batchGenerate`. Backends
 * only decode, report how a sequence ended by itself (EOS, a stop token, the
 * context), and stop decoding a sequence as soon as they are told it is over.
 * They are given `maxTokens` too, so that one holding the bytes of an
 * unfinished character can end there with them flushed ("length").
 */
export abstract class BaseTextModel implements TextModel {
  abstract readonly modelType: string;
  abstract readonly backend: string;
  abstract info(): ModelInfo;

  /**
   * Yields generated tokens until EOS / a stop token (return "stop") or the end
   * of the context (return "length"). It is stopped early through `return()`
   * when a stop string or `maxTokens` ends it (so it must not decode ahead of
   * what it yields); its `finally` must leave the model usable. It should check
   * `signal` during long steps such as prefill.
   */
  protected abstract stream(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
  ): AsyncGenerator<Token, FinishReason | void, undefined>;
  /** Renders messages with the model's chat template (or `options.chatTemplate`). */
  protected abstract renderChat(messages: Message[], options: ResolvedGenerateOptions): string | Promise<string>;
  protected abstract runClassify(
    prompts: string[],
    options: ClassifyOptions,
    signal: AbortSignal,
  ): Promise<ClassifyResult[]>;
  /**
   * Decodes the inputs together, handing each sequence's tokens to `sink` (by
   * index into `inputs`) as they come and ending each sequence there. Stop
   * strings and `maxTokens` are the sink's: a sequence whose `sink.token`
   * returns false is over and must not be decoded further. Resolves once every
   * sequence is ended (any left open count as aborted, or as an error).
   */
  protected abstract runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    sink: BatchSink,
  ): Promise<void>;
  /** Frees backend resources; called once. */
  protected abstract dispose(): Promise<void>;

  /** Backends set this when a call completes. */
  protected lastMetrics: GenerateMetrics = emptyMetrics();
  private lastError: Error | undefined;
  private closed = false;
  /** Calls running now, and those waiting for one of `concurrentCalls()`'s places, in arrival order. */
  private activeCalls = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly idleWaiters: (() => void)[] = [];
  private readonly closing = new AbortController();
  /**
   * Streams waiting at a yield for their consumers: each entry finishes its
   * stream (backend cleanup, release of its place) so `close()` need not wait
   * for a consumer that may never ask for the next token.
   */
  private readonly parkedStreams = new Set<() => Promise<void>>();

  /**
   * How many calls may run on this model at once. A local engine holds one
   * KV cache and runs one call at a time (batched work goes through
   * `batchGenerate`); a backend whose calls are independent requests to a
   * server that batches them itself (remote) allows more, or concurrent
   * streams would wait for each other. `metrics()` then describes the call
   * that finished last.
   */
  protected concurrentCalls(): number {
    return 1;
  }

  generate(prompt: string, options?: GenerateOptions): AsyncIterable<Token> {
    return this.streamCall(() => textInput(prompt), options);
  }

  chat(messages: Message[], options?: GenerateOptions): AsyncIterable<Token> {
    return this.streamCall((resolved) => this.chatInput(messages, resolved), options);
  }

  generateText(prompt: string, options?: GenerateOptions): Promise<GenerationResult> {
    return this.collect((onEnd) => this.streamCall(() => textInput(prompt), options, onEnd));
  }

  chatText(messages: Message[], options?: GenerateOptions): Promise<GenerationResult> {
    return this.collect((onEnd) => this.streamCall((resolved) => this.chatInput(messages, resolved), options, onEnd));
  }

  async classify(prompts: string[], options?: ClassifyOptions): Promise<ClassifyResult[]> {
    return this.exclusive(async (signal) => {
      checkPrompts(prompts);
      validateClassifyOptions(options);
      if (prompts.length === 0) return [];
      return this.runClassify(prompts, options ?? {}, signal);
    }, options?.signal);
  }

  async batchGenerate(prompts: BatchPrompt[], options?: BatchGenerateOptions): Promise<BatchResult[]> {
    const { onToken, onFinish, promptStopStrings, ...generateOptions } = options ?? {};
    try {
      return await this.exclusive(async (signal) => {
        checkBatchPrompts(prompts);
        for (const [name, value] of [
          ["onToken", onToken],
          ["onFinish", onFinish],
        ] as const) {
          if (value !== undefined && typeof value !== "function") {
            throw invalid(`batchGenerate option '${name}' must be a function`);
          }
        }
        checkPromptStopStrings(promptStopStrings, prompts.length);
        const resolved = this.resolveOptions(generateOptions);
        return this.batch(prompts, resolved, signal, { onToken, onFinish, promptStopStrings });
      }, options?.signal);
    } catch (error) {
      // Like generateText, an aborted batch resolves (err() keeps the ABORTED error).
      if (!isInferenceError(error, "ABORTED") || !Array.isArray(prompts)) throw error;
      return prompts.map(() => ({ tokens: [], text: "", finishReason: "abort" as const }));
    }
  }

  /**
   * Renders chat prompts (a failure fails only that prompt), runs the backend's
   * batch behind a `BatchCollector`, which applies each prompt's stop strings
   * and `maxTokens`, so `onToken` sees every emitted token once, in order, and
   * `onFinish` each prompt once, after its tokens, as soon as it is over.
   */
  private async batch(
    prompts: BatchPrompt[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    { onToken, onFinish, promptStopStrings }: Pick<BatchGenerateOptions, "onToken" | "onFinish" | "promptStopStrings">,
  ): Promise<BatchResult[]> {
    const results: BatchResult[] = new Array(prompts.length);
    let callbackError: unknown;
    const guarded = (call: () => void) => {
      try {
        call();
      } catch (error) {
        callbackError ??= error;
      }
    };
    const finish = (index: number, result: BatchResult) => {
      results[index] = result;
      guarded(() => onFinish?.(index, result));
    };
    const inputs: PromptInput[] = [];
    const indexOf: number[] = [];
    for (const [index, prompt] of prompts.entries()) {
      try {
        const input = typeof prompt === "string" ? { text: prompt, chat: false } : await this.chatInput(prompt, options);
        inputs.push({ ...input, stopStrings: promptStopStrings?.[index] ?? options.stopStrings });
        indexOf.push(index);
      } catch (error) {
        finish(index, { tokens: [], text: "", finishReason: "error", error: toInferenceError(error) });
      }
    }
    if (inputs.length > 0) {
      const stops = inputs.map((input) => ({ maxTokens: options.maxTokens, stopStrings: input.stopStrings }));
      const collector = new BatchCollector(stops, {
        onToken: (i, token) => guarded(() => onToken?.(indexOf[i]!, token)),
        onFinish: (i, result) => finish(indexOf[i]!, result),
      });
      await this.runBatch(inputs, options, signal, collector);
      collector.endUnfinished(signal.aborted, this.backend);
    }
    if (callbackError !== undefined) throw toInferenceError(callbackError, "INTERNAL", "batchGenerate onToken threw");
    return results;
  }

  metrics(): GenerateMetrics {
    return { ...this.lastMetrics };
  }

  err(): Error | undefined {
    return this.lastError;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort(closedError());
    await Promise.all([...this.parkedStreams].map((finish) => finish()));
    // Let running calls see the abort and unwind before resources go away.
    await this.idle();
    await this.dispose();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Validates options and refuses the ones this model's declared capabilities
   * cannot honour, so no backend silently ignores a constraint it was asked for.
   */
  private resolveOptions(options: GenerateOptions | undefined): ResolvedGenerateOptions {
    const resolved = resolveGenerateOptions(options);
    const report = capabilitiesOf(this);
    const needs: [keyof GenerateOptions, CapabilityId][] = [
      ["jsonSchema", "grammar"],
      ["grammar", "grammar"],
      ["logprobs", "probe.logits"],
    ];
    for (const [option, capability] of needs) {
      if (resolved[option] !== undefined && report[capability] !== "supported") {
        throw new InferenceError(
          "UNSUPPORTED",
          `backend ${this.backend} cannot honour option '${option}' (capability ${capability} is ${report[capability]})`,
          { details: { option, capability } },
        );
      }
    }
    return resolved;
  }

  /** Throws `CLOSED` once the model is closed. */
  protected assertOpen(): void {
    if (this.closed) throw closedError();
  }

  /**
   * Runs `work` in one of this model's places (alone, unless `concurrentCalls()`
   * allows more) with a signal that fires on abort or close;
   * backends run their own extra calls (inspection, embeddings) through it too.
   */
  protected async exclusive<T>(work: (signal: AbortSignal) => Promise<T>, userSignal?: AbortSignal): Promise<T> {
    this.lastError = undefined;
    const release = await this.acquire();
    const signal = this.callSignal(userSignal);
    try {
      this.assertOpen();
      if (signal.aborted) throw abortedError(signal.reason);
      return await work(signal);
    } catch (error) {
      throw this.fail(error, signal);
    } finally {
      release();
    }
  }

  private streamCall(
    prepare: (resolved: ResolvedGenerateOptions) => PromptInput | Promise<PromptInput>,
    options: GenerateOptions | undefined,
    onEnd?: (reason: FinishReason) => void,
  ): AsyncIterable<Token> {
    const run = async function* (this: BaseTextModel): AsyncGenerator<Token> {
      this.lastError = undefined;
      const release = await this.acquire();
      const idle = new AbortController();
      const signal = AbortSignal.any([this.callSignal(options?.signal), idle.signal]);
      try {
        this.assertOpen();
        const resolved = this.resolveOptions(options);
        const input = await prepare(resolved);
        if (signal.aborted) throw abortedError(signal.reason);
        const inner = this.stream(input, resolved, signal);
        let abandon: ReturnType<typeof setTimeout> | undefined;
        const finish = async () => {
          clearTimeout(abandon);
          await inner.return(undefined);
          release();
        };
        const stopper = new SequenceStopper(resolved);
        let reason: FinishReason = "stop";
        try {
          for (;;) {
            if (signal.aborted) throw abortedError(signal.reason);
            const step = await inner.next();
            const ready = step.done ? stopper.flush() : stopper.push(step.value);
            for (const [i, token] of ready.entries()) {
              if (i > 0 && signal.aborted) throw abortedError(signal.reason);
              this.parkedStreams.add(finish);
              abandon = idleTimer(resolved.idleTimeoutMs, () => {
                idle.abort(`the consumer did not ask for the next token within idleTimeoutMs (${resolved.idleTimeoutMs} ms)`);
                this.parkedStreams.delete(finish);
                void finish();
              });
              try {
                yield token;
              } finally {
                clearTimeout(abandon);
                this.parkedStreams.delete(finish);
              }
            }
            if (step.done || stopper.done) {
              reason = step.done ? (step.value ?? "stop") : stopper.done!;
              break;
            }
          }
        } finally {
          await inner.return(undefined);
        }
        onEnd?.(reason);
      } catch (error) {
        throw this.fail(error, signal);
      } finally {
        release();
      }
    };
    return { [Symbol.asyncIterator]: () => run.call(this) };
  }

  private async chatInput(messages: Message[], resolved: ResolvedGenerateOptions): Promise<PromptInput> {
    checkMessages(messages);
    return { text: await this.renderChat(messages, resolved), chat: true };
  }

  private async collect(
    start: (onEnd: (reason: FinishReason) => void) => AsyncIterable<Token>,
  ): Promise<GenerationResult> {
    const tokens: Token[] = [];
    let finishReason: FinishReason = "stop";
    try {
      for await (const token of start((reason) => (finishReason = reason))) tokens.push(token);
    } catch (error) {
      if (!isInferenceError(error, "ABORTED")) throw error;
      finishReason = "abort";
    }
    return { text: tokens.map((t) => t.text).join(""), tokens, finishReason, metrics: this.metrics() };
  }

  /** A place among `concurrentCalls()`, granted in arrival order; the release it resolves to may be called more than once. */
  private acquire(): Promise<() => void> {
    return new Promise((resolve) => {
      const grant = () => {
        this.activeCalls++;
        let released = false;
        resolve(() => {
          if (released) return;
          released = true;
          this.activeCalls--;
          const next = this.waiting.shift();
          if (next) next();
          else if (this.activeCalls === 0) for (const wake of this.idleWaiters.splice(0)) wake();
        });
      };
      if (this.activeCalls < Math.max(1, this.concurrentCalls()) && this.waiting.length === 0) grant();
      else this.waiting.push(grant);
    });
  }

  /** Resolves once no call runs or waits. */
  private idle(): Promise<void> {
    if (this.activeCalls === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * The call's signal: the caller's and close()'s together. It must not throw
   * (the lock is already held): a value that is no signal at all is left to
   * option validation, and a look-alike from another realm or polyfill is
   * followed through its events.
   */
  private callSignal(userSignal: unknown): AbortSignal {
    if (userSignal instanceof AbortSignal) return AbortSignal.any([userSignal, this.closing.signal]);
    if (!isSignalLike(userSignal)) return this.closing.signal;
    const follower = new AbortController();
    if (userSignal.aborted) follower.abort(userSignal.reason);
    else userSignal.addEventListener("abort", () => follower.abort(userSignal.reason), { once: true });
    return AbortSignal.any([follower.signal, this.closing.signal]);
  }

  private fail(error: unknown, signal: AbortSignal): InferenceError {
    let failure: InferenceError;
    if (this.closing.signal.aborted) failure = closedError();
    else if (isInferenceError(error)) failure = error;
    else if (signal.aborted) failure = abortedError(signal.reason);
    else failure = toInferenceError(error);
    this.lastError = failure;
    return failure;
  }
}

/**
 * Runs `onIdle` after `ms` (0: never). The timer keeps a Node process alive on
 * purpose: calls queued behind an abandoned stream are waiting for it.
 */
function idleTimer(ms: number, onIdle: () => void): ReturnType<typeof setTimeout> | undefined {
  return ms > 0 ? setTimeout(onIdle, ms) : undefined;
}

function isSignalLike(value: unknown): value is AbortSignal {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as AbortSignal).aborted === "boolean" &&
    typeof (value as AbortSignal).addEventListener === "function"
  );
}

function invalid(message: string): InferenceError {
  return new InferenceError("INVALID_OPTION", message);
}

function textInput(prompt: unknown): PromptInput {
  if (typeof prompt !== "string") throw invalid("prompt must be a string");
  return { text: prompt, chat: false };
}

function checkBatchPrompts(prompts: unknown): asserts prompts is BatchPrompt[] {
  if (!Array.isArray(prompts)) throw invalid("prompts must be an array of strings or of message arrays");
  prompts.forEach((prompt: unknown, i) => {
    if (typeof prompt === "string") return;
    if (!Array.isArray(prompt)) throw invalid(`prompts[${i}] must be a string or an array of messages`);
  });
}

function checkPromptStopStrings(value: unknown, prompts: number): void {
  if (value === undefined) return;
  const entryOk = (entry: unknown) =>
    entry === undefined || (Array.isArray(entry) && entry.every((s) => typeof s === "string" && s.length > 0));
  if (!Array.isArray(value) || value.length > prompts || !value.every(entryOk)) {
    throw new InferenceError(
      "INVALID_OPTION",
      `batchGenerate option 'promptStopStrings' must be an array of at most ${prompts} entries (one per prompt), each undefined or an array of non-empty strings`,
      { details: { option: "promptStopStrings" } },
    );
  }
}

function checkPrompts(prompts: unknown): asserts prompts is string[] {
  if (!Array.isArray(prompts) || !prompts.every((p) => typeof p === "string")) {
    throw invalid("prompts must be an array of strings");
  }
}

function checkMessages(messages: unknown): asserts messages is Message[] {
  if (!Array.isArray(messages) || messages.length === 0) throw invalid("messages must be a non-empty array");
  messages.forEach((m: unknown, i) => {
    const msg = m as Partial<Message> | null;
    if (typeof msg !== "object" || msg === null || !ROLES.has(msg.role as string)) {
      throw invalid(`messages[${i}].role must be one of system, user, assistant, tool`);
    }
    if (typeof msg.content !== "string") throw invalid(`messages[${i}].content must be a string`);
  });
}
