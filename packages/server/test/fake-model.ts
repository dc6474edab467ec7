import {
  BaseTextModel,
  type BatchSink,
  type CapabilityId,
  type CapabilityStatus,
  type ClassifyResult,
  type FinishReason,
  InferenceError,
  makeMetrics,
  type Message,
  type ModelInfo,
  type PromptInput,
  type ResolvedGenerateOptions,
  type Token,
} from "@infer/core";

export const STORY = ["Once", " upon", " a", " time", " there", " was", " a", " little", " fox"];

/**
 * A TextModel with a scripted answer: the words of STORY, one token each,
 * optionally slowed down. It records what it was asked and every abort, so
 * tests can check what the server passed through.
 */
export class FakeModel extends BaseTextModel {
  readonly modelType = "fake";
  readonly backend = "fake";
  capabilities: Partial<Record<CapabilityId, CapabilityStatus>> = {};
  /** Generations that saw their signal fire. */
  aborts = 0;
  started = 0;
  lastOptions: ResolvedGenerateOptions | undefined;
  lastPrompt: string | undefined;
  /** The signal of the latest generation or batch. */
  lastSignal: AbortSignal | undefined;

  constructor(
    private readonly delayMs = 0,
    private readonly answer: string[] = STORY,
  ) {
    super();
  }

  info(): ModelInfo {
    return { architecture: "fake", vocabSize: 16, numLayers: 1, hiddenSize: 4, contextLength: 64, quantBits: 32, quantGroup: 0, format: "unknown" };
  }

  protected async *stream(input: PromptInput, options: ResolvedGenerateOptions, signal: AbortSignal): AsyncGenerator<Token, FinishReason> {
    this.started++;
    this.lastSignal = signal;
    this.lastOptions = options;
    this.lastPrompt = input.text;
    if (input.text.includes("overflow")) throw new InferenceError("CONTEXT_OVERFLOW", "the prompt is longer than the context (64 tokens)");
    const promptTokens = input.text.split(/\s+/).filter(Boolean).length;
    const begin = performance.now();
    let produced = 0;
    try {
      for (let i = 0; i < this.answer.length; i++) {
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        if (signal.aborted) return "abort";
        produced++;
        yield { id: i, text: this.answer[i]! };
      }
      return "stop";
    } finally {
      if (signal.aborted) this.aborts++;
      const ms = performance.now() - begin;
      this.lastMetrics = makeMetrics({ promptTokens, generatedTokens: produced, prefillMs: 0, decodeMs: ms, totalMs: ms });
    }
  }

  protected renderChat(messages: Message[]): string {
    // A way for tests to make one chat prompt of a batch fail to render.
    if (messages.some((m) => m.content.includes("unrenderable"))) throw new InferenceError("NO_CHAT_TEMPLATE", "the fake template cannot render 'unrenderable'");
    return messages.map((m) => `${m.role}: ${m.content}`).join("\n") + "\nassistant:";
  }

  protected async runClassify(prompts: string[]): Promise<ClassifyResult[]> {
    return prompts.map(() => ({ token: { id: 0, text: this.answer[0]! } }));
  }

  /** Prompt lists of every batchGenerate call (chat prompts as rendered). */
  batches: string[][] = [];
  /** The options of every batchGenerate call, in order. */
  batchOptions: ResolvedGenerateOptions[] = [];
  /** When set, the next batch waits for it before decoding: tests hold the model's slot this way. */
  gate: Promise<void> | undefined;

  /** Tokens decoded for each prompt of each batchGenerate call (stopped sequences are decoded no further). */
  decodedPerPrompt: number[][] = [];

  protected async runBatch(inputs: PromptInput[], options: ResolvedGenerateOptions, signal: AbortSignal, sink: BatchSink): Promise<void> {
    const prompts = inputs.map((input) => input.text);
    this.batches.push(prompts);
    this.lastSignal = signal;
    this.batchOptions.push(options);
    const gate = this.gate;
    this.gate = undefined;
    await gate;
    this.lastOptions = options;
    this.lastPrompt = prompts.at(-1);
    const decoded = prompts.map(() => 0);
    this.decodedPerPrompt.push(decoded);
    const live = new Set(prompts.keys());
    prompts.forEach((prompt, i) => {
      if (!prompt.includes("overflow")) return;
      sink.end(i, "error", new InferenceError("CONTEXT_OVERFLOW", "the prompt is longer than the context (64 tokens)"));
      live.delete(i);
    });
    // Every live sequence advances one token per step, as a batched decoder would; the batch
    // runs the answer's length (or until aborted) even once its sequences are over.
    for (let step = 0; step < this.answer.length; step++) {
      if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
      if (signal.aborted) {
        this.aborts++;
        for (const i of live) sink.end(i, "abort");
        live.clear();
        break;
      }
      for (const i of live) {
        // A prompt that says "brief" meets EOS after two tokens, as a real model's short answer would.
        if (prompts[i]!.includes("brief") && step === 2) {
          sink.end(i, "stop");
          live.delete(i);
          continue;
        }
        decoded[i]!++;
        if (!sink.token(i, { id: step, text: this.answer[step]! })) live.delete(i);
      }
    }
    for (const i of live) sink.end(i, "stop");
    // Like the stream: a prompt's words are its tokens; a batch sums them.
    const promptTokens = prompts.reduce((n, p) => n + p.split(/\s+/).filter(Boolean).length, 0);
    this.lastMetrics = makeMetrics({ promptTokens, generatedTokens: 0, prefillMs: 0, decodeMs: 1, totalMs: 1 });
  }

  protected async dispose(): Promise<void> {}
}

/** The fake plus an `embed` method: a tiny deterministic vector per text. */
export class FakeEmbeddingModel extends FakeModel {
  async embed(texts: string[]): Promise<Float32Array[]> {
    return texts.map((t) => Float32Array.from([t.length, t.split(" ").length, 1]));
  }
}
