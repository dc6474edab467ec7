import {
  BaseTextModel,
  type BatchSink,
  type CapabilityDeclaration,
  type ClassifyOptions,
  type ClassifyResult,
  type DecodeOptions,
  type EmbeddingModel,
  type EncodeOptions,
  type FinishReason,
  InferenceError,
  type Message,
  type ModelInfo,
  type PromptInput,
  type ResolvedGenerateOptions,
  type Token,
  type TokenizerModel,
  abortedError,
  closedError,
  makeMetrics,
  summarizeLogits,
  toInferenceError,
} from "@infer/core";
import type { LlamaEmbeddingContext } from "node-llama-cpp";
import { runBatch } from "./batch.js";
import { LLAMA_CPP_CAPABILITIES } from "./capabilities.js";
import { renderChatTemplate } from "./chat-template.js";
import { classifyPrompts } from "./classify.js";
import type { DecodeTimings } from "./decode.js";
import { asLlamaTokens } from "./runtime.js";
import type { LlamaCppParts } from "./parts.js";
import { compileGrammar } from "./sampling.js";
import { assertLogprobsCombinable, startDecoding } from "./start-decode.js";

export class LlamaCppModel extends BaseTextModel implements TokenizerModel, EmbeddingModel, CapabilityDeclaration {
  readonly backend = "llama_cpp";
  readonly modelType: string;
  readonly capabilities = LLAMA_CPP_CAPABILITIES;
  private readonly parts: LlamaCppParts;
  private embeddingContext: Promise<LlamaEmbeddingContext> | undefined;
  private probeStep = 0;

  constructor(parts: LlamaCppParts) {
    super();
    this.parts = parts;
    this.modelType = parts.info.architecture;
  }

  info(): ModelInfo {
    return { ...this.parts.info };
  }

  /** The file this model was loaded from. */
  get path(): string {
    return this.parts.path;
  }

  /** CPU threads each decode uses. */
  get threads(): number {
    return this.parts.threads;
  }

  /** Whether layers run on a GPU ("cuda", "vulkan", "metal") or false for CPU only. */
  get gpu(): string | false {
    return this.parts.llama.gpu;
  }

  /**
   * Speculative decoding so far on the single-stream slot: draft tokens that
   * the model confirmed (`validated`) or rejected (`refuted`). All zero without a draft model.
   */
  get speculativeStats(): { validated: number; refuted: number } {
    const { validated, refuted } = this.parts.slots[0]!.tokenPredictions;
    return { validated, refuted };
  }

  /** Layers offloaded to the GPU. */
  get gpuLayers(): number {
    return this.parts.model.gpuLayers;
  }

  // ---- TokenizerModel ----

  encode(text: string, options: EncodeOptions = {}): number[] {
    this.assertOpen();
    if (typeof text !== "string") throw new InferenceError("INVALID_OPTION", "encode() text must be a string");
    return this.tokenize(text, options.addSpecialTokens ?? true);
  }

  decode(ids: number[], options: DecodeOptions = {}): string {
    this.assertOpen();
    this.assertTokenIds(ids, "decode() ids");
    return this.parts.model.detokenize(asLlamaTokens(ids), !(options.skipSpecialTokens ?? false));
  }

  applyChatTemplate(messages: Message[], options: { addGenerationPrompt?: boolean; chatTemplate?: string } = {}): string {
    this.assertOpen();
    const { model } = this.parts;
    const template = model.fileInfo.metadata.tokenizer?.chat_template;
    return renderChatTemplate(
      messages,
      {
        modelTemplate: typeof template === "string" ? template : undefined,
        bosToken: model.tokens.bosString ?? "",
        eosToken: model.tokens.eosString ?? "",
      },
      options,
    );
  }

  // ---- EmbeddingModel ----

  /** Embeddings get their own context (no KV sharing with generation), capped to keep it small. */
  private get embeddingContextLength(): number {
    return Math.min(this.parts.info.contextLength, 2048);
  }

  async embed(texts: string[], options: { signal?: AbortSignal; normalize?: boolean } = {}): Promise<Float32Array[]> {
    this.assertOpen();
    if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) {
      throw new InferenceError("INVALID_OPTION", "embed() texts must be an array of strings");
    }
    this.embeddingContext ??= this.parts.model.createEmbeddingContext({
      contextSize: this.embeddingContextLength,
      threads: this.parts.threads,
    });
    const context = await this.embeddingContext;
    const vectors: Float32Array[] = [];
    for (const text of texts) {
      if (options.signal?.aborted) throw abortedError(options.signal.reason);
      this.assertOpen();
      let embedding;
      try {
        embedding = await context.getEmbeddingFor(text);
      } catch (error) {
        if (this.isClosed) throw closedError();
        const message = error instanceof Error ? error.message : String(error);
        if (/longer than the context/i.test(message)) {
          throw new InferenceError(
            "CONTEXT_OVERFLOW",
            `embed(): a text is longer than the embedding context of ${this.embeddingContextLength} tokens`,
            { cause: error },
          );
        }
        throw toInferenceError(error, "INTERNAL", "embed()");
      }
      const vector = Float32Array.from(embedding.vector);
      if (options.normalize ?? true) normalizeInPlace(vector);
      vectors.push(vector);
    }
    return vectors;
  }

  // ---- BaseTextModel ----

  protected override async *stream(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
  ): AsyncGenerator<Token, FinishReason | void, undefined> {
    const { llama } = this.parts;
    const started = performance.now();
    const prompt = this.tokenize(input.text, true);
    assertLogprobsCombinable(options);
    const grammar = await compileGrammar(llama, options);
    const timings: DecodeTimings = { generated: 0 };
    const decoding = await startDecoding(
      this.parts,
      this.parts.slots[0]!,
      prompt,
      options,
      grammar,
      signal,
      timings,
      (logits) => this.emitLogitsProbe(logits),
    );
    // Counted as handed out: tokens decoded but still held (an unfinished UTF-8
    // character) when the caller stops are not part of the result.
    let emitted = 0;
    try {
      for (;;) {
        const step = await decoding.next();
        if (step.done) return step.value;
        this.emitTokenProbe(step.value, prompt.length + emitted);
        emitted++;
        yield step.value;
      }
    } finally {
      await decoding.return("stop");
      this.recordMetrics(prompt.length, emitted, started, timings.firstTokenAt);
    }
  }

  protected override renderChat(messages: Message[], options: ResolvedGenerateOptions): string {
    return this.applyChatTemplate(messages, { chatTemplate: options.chatTemplate });
  }

  protected override async runClassify(
    prompts: string[],
    options: ClassifyOptions,
    signal: AbortSignal,
  ): Promise<ClassifyResult[]> {
    const started = performance.now();
    const tokenized = prompts.map((p) => this.tokenize(p, true));
    const results = await classifyPrompts(this.parts, tokenized, options, signal);
    const promptTokens = tokenized.reduce((sum, p) => sum + p.length, 0);
    this.recordMetrics(promptTokens, results.length, started, performance.now());
    return results;
  }

  protected override async runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    sink: BatchSink,
  ): Promise<void> {
    const started = performance.now();
    // Chat text is tokenized the same way: special-token text is parsed, BOS is never doubled.
    const tokenized = inputs.map((input) => this.tokenize(input.text, true));
    const outcome = await runBatch(this.parts, tokenized, options, signal, sink);
    const promptTokens = tokenized.reduce((sum, p) => sum + p.length, 0);
    this.recordMetrics(promptTokens, outcome.generated, started, outcome.firstTokenAt);
  }

  protected override async dispose(): Promise<void> {
    const { model, context, draft } = this.parts;
    const embedding = await this.embeddingContext?.catch(() => undefined);
    await embedding?.dispose();
    await context.dispose();
    await draft?.context.dispose();
    await draft?.model.dispose();
    await model.dispose();
  }

  // ---- helpers ----

  /**
   * Text to ids. Special-token text ("<s>", "<|im_start|>") is parsed as the
   * special token, as Hugging Face tokenizers and llama-server do, so rendered
   * chat templates work; BOS is added when the model wants it and the text did
   * not already begin with it.
   */
  private tokenize(text: string, addSpecialTokens: boolean): number[] {
    const { model } = this.parts;
    const ids = model.tokenize(text, true) as number[];
    const bos = model.tokens.bos;
    if (addSpecialTokens && bos !== null && model.tokens.shouldPrependBosToken && ids[0] !== bos) ids.unshift(bos);
    return ids;
  }

  private assertTokenIds(ids: unknown, what: string): asserts ids is number[] {
    const vocab = this.parts.info.vocabSize;
    if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0 && id < vocab)) {
      throw new InferenceError("INVALID_OPTION", `${what} must be an array of token ids in [0, ${vocab})`);
    }
  }

  private recordMetrics(promptTokens: number, generatedTokens: number, started: number, firstTokenAt?: number): void {
    const ended = performance.now();
    const prefillEnd = firstTokenAt ?? ended;
    const memory = this.memoryBytes();
    this.lastMetrics = makeMetrics({
      promptTokens,
      generatedTokens,
      prefillMs: prefillEnd - started,
      decodeMs: ended - prefillEnd,
      totalMs: ended - started,
      // llama.cpp allocates up front, so the peak of a call is what is held.
      peakMemoryBytes: memory,
      activeMemoryBytes: memory,
    });
  }

  /**
   * What llama.cpp holds for this model now, as node-llama-cpp accounts it:
   * weights, the context (KV cache and compute buffers) and the draft's, RAM and VRAM.
   */
  private memoryBytes(): number {
    if (this.isClosed) return 0;
    const { model, context, draft } = this.parts;
    const holders = [model, context, draft?.model, draft?.context].filter((h) => h !== undefined);
    return holders.reduce((sum, holder) => sum + holder.memoryUsage.ram + holder.memoryUsage.vram, 0);
  }

  private emitTokenProbe(token: Token, position: number): void {
    const { probe } = this.parts;
    if (!probe.active || !probe.wants("token")) return;
    probe.emit({ kind: "token", phase: "decode", step: this.probeStep++, payload: { ...token, position } });
  }

  /** Only the logprobs path sees each step's logits; the summary is cheap next to their transfer. */
  private emitLogitsProbe(logits: Float32Array): void {
    const { probe } = this.parts;
    if (!probe.active || !probe.wants("logits")) return;
    probe.emit({ kind: "logits", phase: "decode", step: this.probeStep, payload: summarizeLogits(logits) });
  }

}

function normalizeInPlace(vector: Float32Array): void {
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i] /= norm;
}
