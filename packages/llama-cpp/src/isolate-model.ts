import {
  BaseTextModel,
  type BatchSink,
  type CapabilityDeclaration,
  type ClassifyOptions,
  type ClassifyResult,
  closedError,
  type EmbeddingModel,
  type FinishReason,
  InferenceError,
  isInferenceError,
  type LoadOptions,
  type Message,
  type ModelInfo,
  ProbeBus,
  type ProbedModel,
  type ProbeKind,
  type ProbeSink,
  type PromptInput,
  type ResolvedGenerateOptions,
  type Token,
  validateLoadOptions,
} from "@infer/core";
import { LLAMA_CPP_CAPABILITIES } from "./capabilities.js";
import { type CallRequest, type CallValues, type ChildLoadOptions, fromPortableError, type PortableGenerateOptions } from "./isolate-protocol.js";
import { type ChildCall, LlamaCppProcess } from "./isolate-process.js";

/** What llama.cpp's models emit; `attention` never (llama.cpp does not expose it). */
const PROBE_KINDS: readonly ProbeKind[] = ["token", "logits", "memory"];
/** Crashes in a row while loading after which the model stops restarting its process. */
const MAX_CRASHES_AT_LOAD = 3;

/** Loads a model in a child process of its own (LoadOptions.isolate); see IsolatedLlamaCppModel. */
export async function loadIsolatedLlamaCppModel(path: string, options: LoadOptions): Promise<IsolatedLlamaCppModel> {
  validateLoadOptions(options);
  const { probe, isolate: _isolate, ...childOptions } = options;
  const process = await LlamaCppProcess.start(path, childOptions);
  return new IsolatedLlamaCppModel(path, childOptions, new ProbeBus(probe), process);
}

/**
 * A llama_cpp model whose llama.cpp runs in a child process, so that a native
 * crash (an abort, a signal) fails the calls in flight with `BACKEND_CRASHED`
 * instead of taking this process down; the next call starts a new process and
 * loads the model again. After MAX_CRASHES_AT_LOAD crashes in a row while
 * loading, calls fail at once with `BACKEND_CRASHED` instead.
 *
 * The calls are this process's BaseTextModel's (options, queueing, stops,
 * abort and close are handled here as for every model); the child only
 * decodes, a stream one token per token asked for, a batch up to where this
 * side's stoppers end each sequence. Probe events come back from the child. It has no `TokenizerModel`: a tokenizer's calls are synchronous
 * and the vocabulary lives in the child.
 */
export class IsolatedLlamaCppModel extends BaseTextModel implements EmbeddingModel, CapabilityDeclaration, ProbedModel {
  readonly backend = "llama_cpp";
  readonly modelType: string;
  // The tokenizer and chat-template capabilities read "unsupported" for this model: it lacks their interface.
  readonly capabilities = LLAMA_CPP_CAPABILITIES;
  private loaded: ModelInfo;
  private crashesAtLoad = 0;
  private restarting: Promise<LlamaCppProcess> | undefined;

  constructor(
    /** The file this model was loaded from. */
    readonly path: string,
    private readonly loadOptions: ChildLoadOptions,
    private readonly probe: ProbeBus,
    private process: LlamaCppProcess,
  ) {
    super();
    this.loaded = process.info;
    this.modelType = process.info.architecture;
  }

  info(): ModelInfo {
    return { ...this.loaded };
  }

  /** The id of the child process running the model now; undefined while none runs (it died and restarts at the next call). */
  get pid(): number | undefined {
    return this.process.alive ? this.process.pid : undefined;
  }

  attachProbe(sink: ProbeSink): () => void {
    return this.probe.attach(sink);
  }

  /** As LlamaCppModel's: beside generation (its own context in the child), not queued behind it. */
  async embed(texts: string[], options: { signal?: AbortSignal; normalize?: boolean } = {}): Promise<Float32Array[]> {
    this.assertOpen();
    if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) {
      throw new InferenceError("INVALID_OPTION", "embed() texts must be an array of strings");
    }
    return this.request({ kind: "embed", texts, normalize: options.normalize }, options.signal);
  }

  // ---- BaseTextModel ----

  protected override async *stream(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
  ): AsyncGenerator<Token, FinishReason | void, undefined> {
    const call = await this.open({ kind: "stream", input, options: portable(options) }, signal);
    try {
      for (;;) {
        const message = await call.pull();
        if (message.type === "done") return message.value as CallValues["stream"];
        if (message.type === "token") yield message.token;
      }
    } finally {
      await this.settle(call, signal);
    }
  }

  protected override renderChat(messages: Message[], options: ResolvedGenerateOptions): Promise<string> {
    return this.request({ kind: "render", messages, chatTemplate: options.chatTemplate });
  }

  protected override async runClassify(prompts: string[], options: ClassifyOptions, signal: AbortSignal): Promise<ClassifyResult[]> {
    const { signal: _signal, ...rest } = options;
    const call = await this.open({ kind: "classify", prompts, options: rest }, signal);
    try {
      return (await this.resultOf(call)) as CallValues["classify"];
    } finally {
      await this.settle(call, signal);
    }
  }

  protected override async runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    sink: BatchSink,
  ): Promise<void> {
    const call = await this.open({ kind: "batch", inputs, options: portable(options) }, signal);
    try {
      for (;;) {
        const message = await call.receive();
        if (message.type === "done") return;
        // The child ends each sequence where this sink does (it runs the same stoppers), so its answer is not needed.
        if (message.type === "token" && message.index !== undefined) sink.token(message.index, message.token);
        else if (message.type === "end") {
          sink.end(message.index, message.reason, message.error && fromPortableError(message.error));
        }
      }
    } catch (error) {
      // An aborted batch resolves: the sequences still open end as aborted (BaseTextModel).
      if (!(signal.aborted && isInferenceError(error, "ABORTED"))) throw error;
    } finally {
      await this.settle(call, signal);
    }
  }

  protected override async dispose(): Promise<void> {
    await this.process.close();
  }

  // ---- the child ----

  /** Starts a call in the child, starting a new child first when the last one died. */
  private async open(request: CallRequest, signal?: AbortSignal): Promise<ChildCall> {
    const process = await this.running();
    const kinds = this.probe.active ? PROBE_KINDS.filter((kind) => this.probe.wants(kind)) : [];
    return process.call(request, kinds, (event) => this.probe.emit(event), signal);
  }

  /** The live child, or the one starting (embed runs beside the queued calls, so two may ask at once). */
  private running(): Promise<LlamaCppProcess> {
    if (this.process.alive) return Promise.resolve(this.process);
    this.restarting ??= this.restart().finally(() => (this.restarting = undefined));
    return this.restarting;
  }

  private async restart(): Promise<LlamaCppProcess> {
    if (this.crashesAtLoad >= MAX_CRASHES_AT_LOAD) {
      throw new InferenceError(
        "BACKEND_CRASHED",
        `the llama.cpp process of model '${this.path}' crashed ${this.crashesAtLoad} times in a row while loading the model; ` +
          "it is not restarted again (load the model anew)",
        { details: { path: this.path, crashesAtLoad: this.crashesAtLoad } },
      );
    }
    let started: LlamaCppProcess;
    try {
      started = await LlamaCppProcess.start(this.path, this.loadOptions);
    } catch (error) {
      if (isInferenceError(error, "BACKEND_CRASHED")) this.crashesAtLoad++;
      throw error;
    }
    // close() may have come meanwhile (an embed restarts outside the call queue close waits for).
    if (this.isClosed) {
      await started.close();
      throw closedError();
    }
    this.process = started;
    this.crashesAtLoad = 0;
    this.loaded = this.process.info;
    return this.process;
  }

  /** A call that answers with one value (classify, embed, render). */
  private async request<K extends "embed" | "render">(
    request: Extract<CallRequest, { kind: K }>,
    signal?: AbortSignal,
  ): Promise<CallValues[K]> {
    const call = await this.open(request, signal);
    try {
      return (await this.resultOf(call)) as CallValues[K];
    } finally {
      await call.finish(!signal?.aborted);
    }
  }

  private async resultOf(call: ChildCall): Promise<unknown> {
    for (;;) {
      const message = await call.receive();
      if (message.type === "done") return message.value;
    }
  }

  /** Ends a generating call and keeps its metrics (unless it was aborted: then the child's last word is not awaited). */
  private async settle(call: ChildCall, signal: AbortSignal): Promise<void> {
    const metrics = await call.finish(!signal.aborted);
    if (metrics) this.lastMetrics = metrics;
  }
}

function portable(options: ResolvedGenerateOptions): PortableGenerateOptions {
  const { signal: _signal, ...rest } = options;
  return rest;
}
