import {
  BaseTextModel,
  type BatchResult,
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
  SequenceStopper,
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

  protected async runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    onToken?: (index: number, token: Token) => void,
    onFinish?: (index: number, result: BatchResult) => void,
  ): Promise<BatchResult[]> {
    const prompts = inputs.map((input) => input.text);
    this.batches.push(prompts);
    this.batchOptions.push(options);
    const gate = this.gate;
    this.gate = undefined;
    await gate;
    this.lastOptions = options;
    this.lastPrompt = prompts.at(-1);
    const results: BatchResult[] = prompts.map(() => ({ tokens: [], text: "", finishReason: "stop" }));
    const stoppers = prompts.map(() => new SequenceStopper(options));
    prompts.forEach((prompt, i) => {
      if (prompt.includes("overflow")) results[i]!.error = new InferenceError("CONTEXT_OVERFLOW", "the prompt is longer than the context (64 tokens)");
    });
    const ended = new Set<number>();
    // Every live sequence advances one token per step, as a batched decoder would.
    for (let step = 0; step < this.answer.length; step++) {
      if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
      if (signal.aborted) {
        this.aborts++;
        for (const r of results) r.finishReason = "abort";
        break;
      }
      stoppers.forEach((stopper, i) => {
        if (results[i]!.error || stopper.done || ended.has(i)) return;
        // A prompt that says "brief" meets EOS after two tokens, as a real model's short answer would.
        if (prompts[i]!.includes("brief") && step === 2) {
          ended.add(i);
          results[i]!.tokens.push(...stopper.flush());
          results[i]!.text = results[i]!.tokens.map((t) => t.text).join("");
          onFinish?.(i, results[i]!);
          return;
        }
        for (const token of stopper.push({ id: step, text: this.answer[step]! })) {
          results[i]!.tokens.push(token);
          onToken?.(i, token);
        }
        if (stopper.done) results[i]!.finishReason = stopper.done;
      });
    }
    stoppers.forEach((stopper, i) => {
      if (!stopper.done && !ended.has(i)) results[i]!.tokens.push(...stopper.flush());
      results[i]!.text = results[i]!.tokens.map((t) => t.text).join("");
    });
    // Like the stream: a prompt's words are its tokens; a batch sums them.
    const promptTokens = prompts.reduce((n, p) => n + p.split(/\s+/).filter(Boolean).length, 0);
    this.lastMetrics = makeMetrics({ promptTokens, generatedTokens: 0, prefillMs: 0, decodeMs: 1, totalMs: 1 });
    return results;
  }

  protected async dispose(): Promise<void> {}
}

/** The fake plus an `embed` method: a tiny deterministic vector per text. */
export class FakeEmbeddingModel extends FakeModel {
  async embed(texts: string[]): Promise<Float32Array[]> {
    return texts.map((t) => Float32Array.from([t.length, t.split(" ").length, 1]));
  }
}
