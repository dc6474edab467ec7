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
  type KVSnapshotModel,
  type Message,
  type ModelInfo,
  type MemoryPayload,
  type PromptInput,
  type ProbeCall,
  type ProbeSink,
  type ResolvedGenerateOptions,
  type Token,
  type TokenizerModel,
  abortedError,
  closedError,
  makeMetrics,
  summarizeLogits,
  toInferenceError,
} from "@infer/core";
import type { LlamaContextSequence, LlamaEmbeddingContext } from "node-llama-cpp";
import { runBatch } from "./batch.js";
import { LLAMA_CPP_CAPABILITIES } from "./capabilities.js";
import { renderChatTemplate } from "./chat-template.js";
import { classifyPrompts } from "./classify.js";
import { assignSequences, type DecodeTimings } from "./decode.js";
import { loadSequenceState, saveSequenceState, type StateIdentity } from "./kv-state.js";
import { PeakRss } from "./peak-memory.js";
import { asLlamaTokens } from "./runtime.js";
import type { LlamaCppParts } from "./parts.js";
import { compileGrammar } from "./sampling.js";
import { assertLogprobsCombinable, startDecoding } from "./start-decode.js";

export class LlamaCppModel extends BaseTextModel implements TokenizerModel, EmbeddingModel, KVSnapshotModel, CapabilityDeclaration {
  readonly backend = "llama_cpp";
  readonly modelType: string;
  readonly capabilities = LLAMA_CPP_CAPABILITIES;
  private readonly parts: LlamaCppParts;
  private embeddingContext: Promise<LlamaEmbeddingContext> | undefined;
  /** The sequence of the last generate / chat call: the conversation `snapshotKV` saves. */
  private lastSequence: LlamaContextSequence | undefined;

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
   * Speculative decoding so far over the slots: draft tokens that the model
   * confirmed (`validated`) or rejected (`refuted`). All zero without a draft model.
   */
  get speculativeStats(): { validated: number; refuted: number } {
    const total = { validated: 0, refuted: 0 };
    for (const { tokenPredictions } of this.parts.slots) {
      total.validated += tokenPredictions.validated;
      total.refuted += tokenPredictions.refuted;
    }
    return total;
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

  // ---- KVSnapshotModel ----

  /** The conversation of the last generate / chat call (its tokens and KV cells), as bytes `restoreKV` takes back. */
  snapshotKV(options?: { signal?: AbortSignal }): Promise<Uint8Array> {
    return this.exclusive(
      async () => saveSequenceState(this.lastSequence ?? this.parts.slots[0]!, this.stateIdentity(), this.parts.stateLayout),
      options?.signal,
    );
  }

  /** Loads a `snapshotKV` of this same model into the least recently used sequence; another model's or damaged bytes are refused. */
  restoreKV(snapshot: Uint8Array, options?: { signal?: AbortSignal }): Promise<void> {
    return this.exclusive(async () => {
      const [sequence] = assignSequences(this.parts.slots, [[]]);
      await loadSequenceState(sequence!, snapshot, this.stateIdentity(), this.parts.stateLayout);
      this.lastSequence = sequence;
    }, options?.signal);
  }

  private stateIdentity(): StateIdentity {
    const { architecture, vocabSize, numLayers, hiddenSize, parameters } = this.parts.info;
    return { architecture, vocabSize, numLayers, hiddenSize, parameters: parameters ?? 0, kvType: this.parts.kvType };
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
        if (/longer than the (usable )?context/i.test(message)) {
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
    const call = this.parts.probe.call();
    const peak = new PeakRss();
    const prompt = this.tokenize(input.text, true);
    assertLogprobsCombinable(options);
    const grammar = await compileGrammar(llama, options);
    const timings: DecodeTimings = { generated: 0 };
    const [sequence] = this.parts.reusePrefixes ? assignSequences(this.parts.slots, [prompt]) : this.parts.slots;
    this.lastSequence = sequence;
    const decoding = await startDecoding(
      this.parts,
      sequence!,
      prompt,
      options,
      grammar,
      signal,
      timings,
      (logits) => this.emitLogitsProbe(call, logits, timings.generated),
    );
    // Counted as handed out: tokens decoded but still held (an unfinished UTF-8
    // character) when the caller stops are not part of the result.
    let emitted = 0;
    try {
      for (;;) {
        const step = await decoding.next();
        if (step.done) return step.value;
        this.emitTokenProbe(call, step.value, emitted, prompt.length + emitted);
        emitted++;
        peak.sample();
        yield step.value;
      }
    } finally {
      await decoding.return("stop");
      this.recordMetrics(call, peak, emitted, prompt.length, emitted, started, timings.firstTokenAt, timings.cachedPromptTokens);
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
    const call = this.parts.probe.call();
    const peak = new PeakRss();
    const tokenized = prompts.map((p) => this.tokenize(p, true));
    const results = await classifyPrompts(this.parts, tokenized, options, signal);
    const promptTokens = tokenized.reduce((sum, p) => sum + p.length, 0);
    this.recordMetrics(call, peak, 1, promptTokens, results.length, started, performance.now());
    return results;
  }

  protected override async runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    sink: BatchSink,
  ): Promise<void> {
    const started = performance.now();
    const call = this.parts.probe.call();
    const peak = new PeakRss();
    // Chat text is tokenized the same way: special-token text is parsed, BOS is never doubled.
    const tokenized = inputs.map((input) => this.tokenize(input.text, true));
    // Each sequence's probe steps count its own tokens, from 0.
    const steps = inputs.map(() => 0);
    const probed: BatchSink = {
      token: (index, token) => {
        this.emitTokenProbe(call, token, steps[index]!, tokenized[index]!.length + steps[index]!, index);
        steps[index]!++;
        peak.sample();
        return sink.token(index, token);
      },
      end: (index, reason, error) => sink.end(index, reason, error),
    };
    const onLogits = (index: number, logits: Float32Array, step: number) => this.emitLogitsProbe(call, logits, step, index);
    const outcome = await runBatch(this.parts, tokenized, options, signal, probed, onLogits);
    const promptTokens = tokenized.reduce((sum, p) => sum + p.length, 0);
    this.recordMetrics(call, peak, Math.max(0, ...steps), promptTokens, outcome.generated, started, outcome.firstTokenAt, outcome.cachedPromptTokens);
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
    const { model, textGuard } = this.parts;
    textGuard?.(text);
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

  /** Ends a call: its metrics and its `memory` event (`steps`: the most tokens any of its sequences produced). */
  private recordMetrics(
    call: ProbeCall,
    peak: PeakRss,
    steps: number,
    promptTokens: number,
    generatedTokens: number,
    started: number,
    firstTokenAt?: number,
    cachedPromptTokens = 0,
  ): void {
    const ended = performance.now();
    const prefillEnd = firstTokenAt ?? ended;
    const memory = this.callMemory(peak);
    this.lastMetrics = makeMetrics({
      promptTokens,
      cachedPromptTokens,
      generatedTokens,
      prefillMs: prefillEnd - started,
      decodeMs: ended - prefillEnd,
      totalMs: ended - started,
      peakMemoryBytes: memory.peakBytes,
      activeMemoryBytes: memory.activeBytes,
    });
    if (call.wants("memory")) call.emit("memory", steps > 1 ? "decode" : "prefill", steps, memory);
  }

  /**
   * Active: what llama.cpp holds for this model, as node-llama-cpp accounts
   * it (weights, the context's KV cache and compute buffers, the draft's; RAM
   * and VRAM). Peak: the process's resident-set peak during the call (see
   * PeakRss) plus the VRAM held, which RSS does not see; never below active
   * (memory-mapped weights may not all be resident).
   */
  private callMemory(peak: PeakRss): MemoryPayload {
    const residentPeak = peak.final();
    if (this.isClosed) return { activeBytes: 0, peakBytes: residentPeak };
    const { model, context, draft } = this.parts;
    type Usage = { ram: number; vram: number };
    const total = (holders: ({ memoryUsage: Usage } | undefined)[], part: (usage: Usage) => number) =>
      holders.reduce((sum, holder) => sum + (holder ? part(holder.memoryUsage) : 0), 0);
    const all = [model, context, draft?.model, draft?.context];
    const vram = total(all, (usage) => usage.vram);
    const active = total(all, (usage) => usage.ram + usage.vram);
    const weightBytes = total([model, draft?.model], (usage) => usage.ram + usage.vram);
    return { activeBytes: active, peakBytes: Math.max(active, residentPeak + vram), weightBytes };
  }

  private emitTokenProbe(call: ProbeCall, token: Token, step: number, position: number, sequence?: number): void {
    if (!call.wants("token")) return;
    call.emit("token", step === 0 ? "prefill" : "decode", step, { id: token.id, text: token.text, position }, sequence);
  }

  /** Only the logprobs path sees each step's logits; the summary is cheap next to their transfer. */
  private emitLogitsProbe(call: ProbeCall, logits: Float32Array, step: number, sequence?: number): void {
    if (!call.wants("logits")) return;
    call.emit("logits", step === 0 ? "prefill" : "decode", step, summarizeLogits(logits), sequence);
  }

  /** Adds a probe sink after load (ProbedModel). The `attention` kind is never emitted: llama.cpp does not expose attention. */
  attachProbe(sink: ProbeSink): () => void {
    return this.parts.probe.attach(sink);
  }

}

function normalizeInPlace(vector: Float32Array): void {
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i] /= norm;
}
