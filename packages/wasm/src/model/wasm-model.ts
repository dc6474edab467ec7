import {
  type AttentionInspector,
  type AttentionSnapshot,
  BaseTextModel,
  type BatchSink,
  type ClassifyOptions,
  type ClassifyResult,
  DEFAULT_GENERATE_OPTIONS,
  type FinishReason,
  InferenceError,
  type KVSnapshotModel,
  type Message,
  type ModelInfo,
  makeMetrics,
  type PromptInput,
  type MemoryPayload,
  type ProbeBus,
  type ProbeCall,
  type ProbeSink,
  randomSeed,
  type SamplerSettings,
  type ResolvedGenerateOptions,
  summarizeLogits,
  type Token,
  type TokenizerModel,
  toInferenceError,
} from "@infer/core";
import { platform } from "#platform";
import type { KVCache, KVCacheType, Transformer } from "../engine/transformer.js";
import type { Tokenizer } from "../tokenizer/types.js";
import { utf8Decode } from "../tokenizer/stream-decoder.js";
import { WASM_CAPABILITIES } from "./capabilities.js";
import { decodeSnapshot, encodeSnapshot, type KVIdentity } from "./kv-snapshot.js";
import { PrefixCache } from "./prefix-cache.js";
import { DecodeScheduler, type Sequence, type SequenceRequest } from "./scheduler.js";

export interface WasmModelParts {
  /** What the model was loaded from, as the caller named it. */
  source?: string;
  transformer: Transformer;
  tokenizer: Tokenizer;
  info: ModelInfo;
  contextLength: number;
  parallelSlots: number;
  /** LoadOptions.batchSize: most prompt tokens a forward pass carries; undefined, the scheduler's default. */
  batchSize?: number;
  /** How the KV cache stores keys and values. */
  kvType: KVCacheType;
  /** LoadOptions.promptCacheBytes, resolved: the budget for copies of earlier prompts' KV rows. */
  promptCacheBytes: number;
  probe: ProbeBus;
  dispose(): Promise<void>;
}

/**
 * The warm-up's prompt tokens (a prime, so that sizes divided by it are fractional
 * as for most real prompts) and decode steps: enough, as measured with
 * --trace-opt, for V8 to have compiled the decode path before the first generation.
 */
const WARM_UP_PROMPT_TOKENS = 37;
const WARM_UP_STEPS = 64;

/** A model running on our own engine. */
export class WasmModel extends BaseTextModel implements TokenizerModel, AttentionInspector, KVSnapshotModel {
  readonly backend = "wasm";
  readonly modelType: string;
  readonly capabilities = WASM_CAPABILITIES;
  private readonly cache: KVCache;
  private readonly prefixes: PrefixCache;
  /** The slot of the last generate / chat call: the conversation `snapshotKV` saves. */
  private lastSlot = 0;
  private disposed = false;

  constructor(protected readonly parts: WasmModelParts) {
    super();
    this.modelType = parts.info.architecture;
    this.cache = parts.transformer.createCache(parts.parallelSlots, parts.contextLength, parts.kvType);
    this.prefixes = new PrefixCache(this.cache, parts.promptCacheBytes);
  }

  /**
   * The conversation of the last generate / chat call (its prompt and the
   * tokens generated): ids and KV rows, to bytes that `restoreKV` takes back,
   * in this process or another, so a later prompt that continues it evaluates
   * only what is new.
   */
  snapshotKV(options?: { signal?: AbortSignal }): Promise<Uint8Array> {
    return this.exclusive(async () => encodeSnapshot(this.kvIdentity(), this.prefixes.snapshot(this.lastSlot)), options?.signal);
  }

  /** Loads a `snapshotKV` of a model of the same shape; another model's (INVALID_OPTION) or damaged bytes (MODEL_FORMAT) are refused. */
  restoreKV(snapshot: Uint8Array, options?: { signal?: AbortSignal }): Promise<void> {
    return this.exclusive(async () => {
      const layerParts = this.cache.keys.length * 2;
      const state = decodeSnapshot(snapshot, this.kvIdentity(), this.parts.contextLength, (n) => layerParts * n * this.cache.rowBytes);
      this.lastSlot = this.prefixes.restore(state);
    }, options?.signal);
  }

  /** The model's weights changed (a LoRA adapter applied or trained): cached prefixes are stale. */
  protected forgetPrefixes(): void {
    this.prefixes.forgetAll();
  }

  info(): ModelInfo {
    return { ...this.parts.info };
  }

  encode(text: string, options?: { addSpecialTokens?: boolean }): number[] {
    this.assertOpen();
    return this.parts.tokenizer.encode(text, { addSpecialTokens: options?.addSpecialTokens ?? true });
  }

  decode(ids: number[], options?: { skipSpecialTokens?: boolean }): string {
    this.assertOpen();
    return this.parts.tokenizer.decode(ids, { skipSpecialTokens: options?.skipSpecialTokens ?? false });
  }

  applyChatTemplate(messages: Message[], options?: { addGenerationPrompt?: boolean; chatTemplate?: string }): string {
    this.assertOpen();
    return this.parts.tokenizer.renderChat(messages, {
      addGenerationPrompt: options?.addGenerationPrompt ?? true,
      chatTemplate: options?.chatTemplate,
    });
  }

  /**
   * A greedy generation on slot 0 that leaves no trace (no metrics, probe
   * events or cached positions), run at load: V8 optimizes the JavaScript
   * around the kernels on a background thread once it is hot, and where the
   * kernel threads take every core that compilation slows the first
   * generation after load (docs/performance.md, "Cold decode"). Both a
   * prompt and decode steps, so that the prefill and decode paths have met
   * the values they take later (a prompt length whose tile divisions are
   * fractional, a scratch that grows): code optimized on narrower feedback
   * is thrown away at the first real prompt and compiled again.
   */
  warmUp(): Promise<void> {
    return this.exclusive(async (signal) => {
      const promptTokens = Math.min(WARM_UP_PROMPT_TOKENS, Math.floor(this.parts.contextLength / 2));
      const steps = Math.min(WARM_UP_STEPS, this.parts.contextLength - promptTokens);
      const options: ResolvedGenerateOptions = { ...DEFAULT_GENERATE_OPTIONS, temperature: 0, maxTokens: steps, ignoreEos: true, stopTokens: [], stopStrings: [] };
      const first = this.parts.tokenizer.bosId ?? 0;
      const scheduler = this.scheduler();
      const seq = scheduler.start(0, this.request(new Array<number>(promptTokens).fill(first), options, 0));
      try {
        while (!seq.done) {
          scheduler.step([seq], signal);
          seq.drain();
          await platform.nextTask();
        }
      } finally {
        this.cache.clear(0);
      }
    });
  }

  /**
   * Prefills `prompt` and returns the keys it left in the KV cache (after
   * RoPE), per layer and KV head. Queries are not kept by the engine.
   */
  inspectAttention(prompt: string, options?: { signal?: AbortSignal }): Promise<AttentionSnapshot> {
    return this.exclusive(async (signal) => {
      if (typeof prompt !== "string") throw new InferenceError("INVALID_OPTION", "prompt must be a string");
      const scheduler = this.scheduler();
      this.prefixes.forget(0);
      const greedy: ResolvedGenerateOptions = {
        ...DEFAULT_GENERATE_OPTIONS,
        temperature: 0,
        maxTokens: 1,
        stopTokens: [],
        stopStrings: [],
      };
      const seq = scheduler.start(0, this.request(this.promptIds({ text: prompt, chat: false }), greedy, 0));
      while (seq.inPrompt) scheduler.step([seq], signal);
      const { numLayers, numKVHeads, headDim } = this.parts.transformer.config;
      const seqLen = seq.request.promptIds.length;
      const kvDim = numKVHeads * headDim;
      const slotBase = 0; // slot 0 starts the cache's rows
      const keys = this.cache.keys.map((_, layer) =>
        Array.from({ length: numKVHeads }, (_, head) => {
          const out = new Float32Array(seqLen * headDim); // [seqLen, headDim]
          for (let p = 0; p < seqLen; p++) {
            const from = (slotBase + p) * kvDim + head * headDim;
            out.set(this.cache.readKeys(layer, from, headDim), p * headDim);
          }
          return out;
        }),
      );
      return {
        numLayers,
        numKVHeads,
        numQueryHeads: this.parts.transformer.config.numHeads,
        seqLen,
        headDim,
        keys,
      };
    }, options?.signal);
  }

  protected renderChat(messages: Message[], options: ResolvedGenerateOptions): string {
    return this.parts.tokenizer.renderChat(messages, { addGenerationPrompt: true, chatTemplate: options.chatTemplate });
  }

  protected async *stream(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
  ): AsyncGenerator<Token, FinishReason | void, undefined> {
    const started = performance.now();
    const call = this.startCall();
    const scheduler = this.scheduler();
    const promptIds = this.promptIds(input);
    const request = this.request(promptIds, options, options.seed ?? randomSeed());
    const slot = this.prefixes.pickSlot(this.allSlots(), promptIds);
    const seq = scheduler.start(slot, request, this.prefixes.claim(slot, promptIds));
    const cachedPromptTokens = seq.position;
    this.lastSlot = slot;
    let firstTokenAt = 0;
    try {
      while (!seq.done) {
        scheduler.step([seq], signal);
        if (firstTokenAt === 0 && !seq.inPrompt) firstTokenAt = performance.now();
        this.emitProbes(call, seq);
        for (const token of seq.drain()) yield token;
        // Let timers and I/O (abort signals, servers) run between steps.
        await platform.nextTask();
      }
      return seq.finishReason === "length" ? "length" : "stop";
    } finally {
      this.prefixes.release(slot, seq.cachedIds());
      const end = performance.now();
      const memory = this.endCall(call, seq.generatedIds.length);
      this.lastMetrics = makeMetrics({
        promptTokens: seq.request.promptIds.length,
        cachedPromptTokens,
        generatedTokens: seq.generatedIds.length,
        prefillMs: (firstTokenAt || end) - started,
        decodeMs: firstTokenAt ? end - firstTokenAt : 0,
        totalMs: end - started,
        peakMemoryBytes: memory.peakBytes,
        activeMemoryBytes: memory.activeBytes,
      });
    }
  }

  protected async runClassify(prompts: string[], options: ClassifyOptions, signal: AbortSignal): Promise<ClassifyResult[]> {
    const started = performance.now();
    const call = this.startCall();
    // Greedy unless the caller asks for sampling: classification wants the model's top choice.
    const resolved: ResolvedGenerateOptions = {
      ...DEFAULT_GENERATE_OPTIONS,
      temperature: 0,
      ...defined(options),
      stopTokens: [],
      stopStrings: [],
      maxTokens: 1,
    };
    const seed = options.seed ?? randomSeed();
    const results: ClassifyResult[] = [];
    let promptTokens = 0;
    try {
      // One batched prefill per wave of `parallelSlots` prompts.
      for (let at = 0; at < prompts.length; at += this.parts.parallelSlots) {
        const wave = prompts.slice(at, at + this.parts.parallelSlots);
        // Without a batch size, each wave's prompts in one pass.
        const scheduler = this.scheduler(this.parts.batchSize ?? Infinity);
        const sequences = wave.map((prompt, i) => {
          const ids = this.promptIds({ text: prompt, chat: false });
          promptTokens += ids.length;
          // No end ids: EOS is a valid answer for a classifier.
          const request = { ...this.request(ids, resolved, seed), endIds: new Set<number>(), captureLogits: options.logits, captureAttention: false };
          this.prefixes.forget(i);
          return scheduler.start(i, request);
        });
        while (sequences.some((s) => s.inPrompt)) scheduler.step(sequences, signal);
        for (const seq of sequences) {
          const id = seq.generatedIds[0]!;
          results.push({
            token: { id, text: this.parts.tokenizer.decode([id], { skipSpecialTokens: false }) },
            ...(options.logits ? { logits: seq.lastLogits! } : {}),
          });
        }
        await platform.nextTask();
      }
    } finally {
      const total = performance.now() - started;
      const memory = this.endCall(call, 1);
      this.lastMetrics = makeMetrics({
        promptTokens,
        generatedTokens: results.length,
        prefillMs: total,
        decodeMs: 0,
        totalMs: total,
        peakMemoryBytes: memory.peakBytes,
        activeMemoryBytes: memory.activeBytes,
      });
    }
    return results;
  }

  protected async runBatch(
    inputs: PromptInput[],
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
    sink: BatchSink,
  ): Promise<void> {
    const started = performance.now();
    const call = this.startCall();
    // A given seed is every sequence's (so each equals its single call); otherwise each draws its own.
    const seedFor = () => options.seed ?? randomSeed();
    const waiting = inputs.map((_, i) => i);
    const scheduler = this.scheduler();
    const running = new Map<Sequence, number>();
    const freeSlots = Array.from({ length: this.parts.parallelSlots }, (_, i) => i);
    let generated = 0;
    let cachedPromptTokens = 0;
    // The most tokens one sequence generated: the memory event's step.
    let steps = 0;
    try {
      // Continuous batching: a slot freed by a finished sequence takes the next prompt.
      while (waiting.length > 0 || running.size > 0) {
        while (waiting.length > 0 && freeSlots.length > 0) {
          const index = waiting.shift()!;
          try {
            const ids = this.promptIds(inputs[index]!);
            const request = this.request(ids, options, seedFor());
            const slot = this.prefixes.pickSlot(freeSlots, ids);
            const seq = scheduler.start(slot, request, this.prefixes.claim(slot, ids));
            cachedPromptTokens += seq.position;
            running.set(seq, index);
            freeSlots.splice(freeSlots.indexOf(slot), 1);
          } catch (error) {
            sink.end(index, "error", error);
          }
        }
        if (running.size === 0) break;
        if (signal.aborted) {
          for (const index of [...running.values(), ...waiting]) sink.end(index, "abort");
          break;
        }
        scheduler.step([...running.keys()], signal);
        for (const [seq, index] of running) {
          steps = Math.max(steps, seq.generatedIds.length);
          this.emitProbes(call, seq, index);
          // A sequence the sink ends (a stop string, maxTokens) gives its slot up before the next step.
          for (const token of seq.drain()) {
            if (sink.token(index, token)) continue;
            seq.close();
            break;
          }
          if (!seq.done) continue;
          sink.end(index, seq.finishReason!);
          generated += seq.generatedIds.length;
          this.prefixes.release(seq.slot, seq.cachedIds());
          running.delete(seq);
          freeSlots.push(seq.slot);
        }
        await platform.nextTask();
      }
      for (const seq of running.keys()) generated += seq.generatedIds.length;
    } finally {
      for (const seq of running.keys()) this.prefixes.release(seq.slot, seq.cachedIds());
      const total = performance.now() - started;
      const memory = this.endCall(call, steps);
      this.lastMetrics = makeMetrics({
        // The scheduler counts the prompt tokens it evaluated; reused ones it never saw.
        promptTokens: scheduler.timings.promptTokens + cachedPromptTokens,
        cachedPromptTokens,
        generatedTokens: generated,
        prefillMs: scheduler.timings.prefillMs,
        decodeMs: scheduler.timings.decodeMs,
        totalMs: total,
        peakMemoryBytes: memory.peakBytes,
        activeMemoryBytes: memory.activeBytes,
      });
    }
  }

  protected async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    this.cache.dispose();
    await this.parts.dispose();
  }

  private allSlots(): number[] {
    return Array.from({ length: this.parts.parallelSlots }, (_, i) => i);
  }

  private kvIdentity(): KVIdentity {
    const { architecture, vocabSize, numLayers, numKVHeads, headDim } = this.parts.transformer.config;
    return { architecture, vocabSize, numLayers, numKVHeads, headDim, kvType: this.cache.kvType };
  }

  /** A decode loop over this model's cache, prompts in chunks of `chunk` tokens (by default the load's batchSize, else the scheduler's). */
  private scheduler(chunk = this.parts.batchSize): DecodeScheduler {
    return new DecodeScheduler(this.parts.transformer, this.cache, this.parts.contextLength, chunk);
  }

  /** Prompt ids: BOS added for plain prompts; a chat template that already starts with BOS text gets none twice. */
  private promptIds(input: PromptInput): number[] {
    const tokenizer = this.parts.tokenizer;
    try {
      const ids = tokenizer.encode(input.text, { addSpecialTokens: true });
      const bos = tokenizer.bosId;
      if (input.chat && bos !== undefined && ids.length > 1 && ids[0] === bos && ids[1] === bos) ids.shift();
      return ids;
    } catch (error) {
      throw toInferenceError(error, "INVALID_OPTION", "could not tokenize the prompt");
    }
  }

  private request(promptIds: number[], options: ResolvedGenerateOptions, seed: number): SequenceRequest {
    const sampler: SamplerSettings = {
      temperature: options.temperature,
      topK: options.topK,
      topP: options.topP,
      minP: options.minP,
      repeatPenalty: options.repeatPenalty,
      repeatLastN: options.repeatLastN,
    };
    const endIds = new Set<number>(options.stopTokens);
    if (!options.ignoreEos) for (const id of this.parts.tokenizer.eosIds) endIds.add(id);
    for (const id of endIds) {
      if (id >= this.parts.info.vocabSize) {
        throw new InferenceError("INVALID_OPTION", `stopTokens: id ${id} is outside the vocabulary (${this.parts.info.vocabSize})`, {
          details: { option: "stopTokens", value: id },
        });
      }
    }
    return {
      promptIds,
      sampler,
      seed,
      endIds,
      maxTokens: options.maxTokens,
      // Control tokens (a BOS the model emits mid-stream, ...) add no text, as in llama.cpp.
      detokenizer: this.parts.tokenizer.streamDecoder({ skipSpecialTokens: true }),
      captureLogits: this.parts.probe.active && this.parts.probe.wants("logits"),
      captureAttention: this.parts.probe.active && this.parts.probe.wants("attention"),
      logprobs: options.logprobs,
      tokenText: (id) => utf8Decode(this.parts.tokenizer.tokenBytes(id)),
    };
  }

  /** Adds a probe sink after load (ProbedModel). */
  attachProbe(sink: ProbeSink): () => void {
    return this.parts.probe.attach(sink);
  }

  /** A call begins: its probe events count time from now, and its memory peak from what is held now. */
  private startCall(): ProbeCall {
    this.parts.transformer.resetPeak();
    return this.parts.probe.call();
  }

  /**
   * A call ends: its memory, reported as a `memory` event. What the model
   * holds is its weights, KV cache, forward scratch and logits buffer; the
   * scratch grows with the tokens one forward carries, so the peak is the
   * high-water mark of those during the call, not the process's RSS.
   */
  private endCall(call: ProbeCall, steps: number): MemoryPayload {
    const memory = {
      activeBytes: this.parts.transformer.heldBytes + this.cache.bytes,
      peakBytes: this.parts.transformer.peakHeldBytes + this.cache.bytes,
      weightBytes: this.parts.transformer.weightBytes,
      kvCacheBytes: this.cache.bytes,
    };
    if (call.wants("memory")) call.emit("memory", steps > 1 ? "decode" : "prefill", steps, memory);
    return memory;
  }

  /** The probe events of the token `seq` sampled in the last step, if any; `sequence`: its prompt's index in a batch. */
  private emitProbes(call: ProbeCall, seq: Sequence, sequence?: number): void {
    if (!call.active || seq.generatedIds.length === 0 || seq.reported === seq.generatedIds.length) return;
    seq.reported = seq.generatedIds.length;
    const id = seq.generatedIds[seq.generatedIds.length - 1]!;
    const step = seq.generatedIds.length - 1;
    const phase = step === 0 ? "prefill" : "decode";
    if (call.wants("token")) {
      const payload = { id, text: this.parts.tokenizer.decode([id], {}), position: seq.position };
      call.emit("token", phase, step, payload, sequence);
    }
    if (call.wants("logits") && seq.lastLogits) call.emit("logits", phase, step, summarizeLogits(seq.lastLogits), sequence);
    if (call.wants("attention") && seq.lastAttention) {
      seq.lastAttention.forEach((weights, layer) => call.emit("attention", phase, step, { layer, weights }, sequence));
    }
  }
}

function defined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
