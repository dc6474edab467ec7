/**
 * The forward pass: token ids of one or more sequences in, logits of the
 * requested rows out, keys and values kept in a KVCache between calls.
 */
import { InferenceError } from "@infer/core";
import type { AttentionKernel, Kernels, WeightMatrix } from "../kernels/types.js";
import { referenceAttention, referenceKernels } from "../kernels/reference.js";
import { embeddingLookup } from "../kernels/dequant.js";
import { KVCache, type KVCacheType } from "./cache.js";
import type { ModelConfig } from "./config.js";
import { rmsNormRows, type ForwardContext, type QueryObserver } from "./layers.js";
import { ForwardScratch } from "./scratch.js";
import type { LoraDeltas } from "./lora.js";
import type { TrainableBlocks } from "./block-weights.js";

export type { ModelConfig } from "./config.js";
export type { QueryObserver } from "./layers.js";
export { KVCache, type KVCacheType } from "./cache.js";

/** An architecture's weights, loaded and ready to run: what a Transformer runs (arch/ builds it, load/ hands it over). */
export interface LoadedModel {
  /** [vocabSize, hiddenSize] */
  embedding: WeightMatrix;
  /** [hiddenSize] */
  outputNorm: Float32Array;
  /** [vocabSize, hiddenSize]; the embedding itself when tied. */
  output: WeightMatrix;
  /** Runs every decoder block over x [tokens, hiddenSize] in place. */
  runLayers(ctx: ForwardContext, x: Float32Array): void;
  /** The blocks as training reads them; absent for architectures training does not cover yet. */
  trainable?: TrainableBlocks;
}

export interface ForwardBatch {
  /** [n] token ids */
  tokens: Int32Array;
  /** [n] position of each token in its sequence */
  positions: Int32Array;
  /** [n] which sequence (KV cache slot) each token belongs to */
  seqIds: Int32Array;
  /** Indices into the batch whose logits are wanted (e.g. the last token of each sequence). */
  logitRows: Int32Array;
}

export class Transformer {
  readonly kernels: Kernels;
  private readonly attention: AttentionKernel;
  /** Intermediate buffers of a forward call, reused by the next (in the kernels' memory when they have one). */
  private readonly scratch: ForwardScratch;
  /** logitsBuffer's floats, and the kernels' memory under them when they have one. */
  private logits: Float32Array = new Float32Array(0);
  private logitsMemory: Uint8Array | undefined;
  private peakLogitsBytes = 0;
  /** A LoRA adapter's deltas, added to the projections they adapt (lora.ts); undefined runs the base alone. */
  lora: LoraDeltas | undefined;

  constructor(
    readonly config: ModelConfig,
    private readonly model: LoadedModel,
    /** Bytes of the weights as stored (quantized bytes for quantized types). */
    readonly weightBytes: number,
    readonly parameterCount: number,
    kernels: Kernels = referenceKernels,
    /** Views of the kernels' memory holding this model's weights (its file bytes), handed back by `releaseMemory`. */
    private readonly heldMemory: Uint8Array[] = [],
  ) {
    this.kernels = kernels;
    this.attention = kernels.attention ?? referenceAttention;
    this.scratch = new ForwardScratch(kernels);
  }

  /** A KV cache shaped for this model, in the kernels' memory when they have one (attention reads it in place). */
  createCache(numSeqs: number, contextLength: number, kvType: KVCacheType = "f32"): KVCache {
    return new KVCache(this.config, numSeqs, contextLength, this.kernels, kvType);
  }

  /**
   * Runs the batch and returns logits [logitRows.length, vocabSize], row-major.
   * Each sequence's first token in the batch may sit at any position up to its
   * cached length (below it rewinds the sequence: later cached positions are
   * dropped); its further tokens must follow one position at a time.
   * Nothing is written to the cache when the batch is rejected.
   * `logitsInto`: a buffer of at least [logitRows.length, vocabSize] floats to
   * write the logits to (a view of it is returned), so a decode loop reuses one
   * buffer instead of allocating vocabSize floats per token; absent, a new array.
   * `observeQueries` sees each layer's rotated queries (attention probes).
   */
  forward(batch: ForwardBatch, cache: KVCache, logitsInto?: Float32Array, observeQueries?: QueryObserver): Float32Array {
    const newLengths = this.validate(batch, cache);
    const { hiddenSize, vocabSize } = this.config;
    const n = batch.tokens.length;
    this.scratch.begin(n);
    const x = this.scratch.forwardFloats(n * hiddenSize); // [n, hidden], the residual stream
    embeddingLookup(x, this.model.embedding, batch.tokens, this.config.embeddingScale);
    const ctx: ForwardContext = {
      kernels: this.kernels,
      attention: this.attention,
      config: this.config,
      cache,
      tokens: n,
      positions: batch.positions,
      seqIds: batch.seqIds,
      scratch: this.scratch,
      observeQueries,
      lora: this.lora,
    };
    this.model.runLayers(ctx, x);
    for (const [seq, length] of newLengths) cache.setLength(seq, length);

    const m = batch.logitRows.length;
    const selected = this.scratch.floats(m * hiddenSize); // [m, hidden]
    for (let i = 0; i < m; i++) {
      const row = batch.logitRows[i]!;
      selected.set(x.subarray(row * hiddenSize, (row + 1) * hiddenSize), i * hiddenSize);
    }
    rmsNormRows(this.kernels, this.config, selected, selected, this.model.outputNorm, m, hiddenSize);
    const logits = logitsInto && logitsInto.length >= m * vocabSize ? logitsInto.subarray(0, m * vocabSize) : new Float32Array(m * vocabSize); // [m, vocab]
    if (m > 0) this.kernels.matmul(logits, this.model.output, selected, m);
    const cap = this.config.finalLogitSoftcap;
    if (cap > 0) for (let i = 0; i < logits.length; i++) logits[i] = cap * Math.tanh(logits[i]! / cap);
    return logits;
  }

  /**
   * A buffer of at least [rows, vocab] floats for forward's `logitsInto`, reused
   * by later calls (a larger request replaces it). It lives in the kernels' memory when they
   * have one, so the output projection writes the logits in place instead of
   * into a staging buffer copied out (a vocabulary of floats every token).
   */
  logitsBuffer(rows: number): Float32Array {
    const needed = rows * this.config.vocabSize;
    if (this.logits.length < needed) {
      if (this.logitsMemory) this.kernels.release?.(this.logitsMemory);
      this.logitsMemory = this.kernels.allocate?.(needed * 4, 64);
      this.logits = this.logitsMemory ? new Float32Array(this.logitsMemory.buffer, this.logitsMemory.byteOffset, needed) : new Float32Array(needed);
      this.peakLogitsBytes = Math.max(this.peakLogitsBytes, this.logits.byteLength);
    }
    return this.logits;
  }

  /** The loaded weights, for training (which reads them and never writes). */
  get weights(): LoadedModel {
    return this.model;
  }

  /** Bytes this model holds besides its KV caches: weights, forward scratch and the logits buffer. */
  get heldBytes(): number {
    return this.weightBytes + this.scratch.bytes + this.logits.byteLength;
  }

  /**
   * The most `heldBytes` has been since `resetPeak`: the scratch grows with the
   * tokens a forward carries (longer prompt chunks, more sequences), the logits buffer with its rows.
   */
  get peakHeldBytes(): number {
    return this.weightBytes + this.scratch.peakBytes + this.peakLogitsBytes;
  }

  resetPeak(): void {
    this.scratch.resetPeak();
    this.peakLogitsBytes = this.logits.byteLength;
  }

  /** Frees what the kernels hold (workers, WebAssembly memory). */
  async dispose(): Promise<void> {
    this.releaseMemory();
    await this.kernels.dispose?.();
  }

  /**
   * Hands this model's weights and scratch back to kernels it shares with
   * others (which stay usable); the Transformer cannot run afterwards.
   */
  releaseMemory(): void {
    this.scratch.dispose();
    if (this.logitsMemory) this.kernels.release?.(this.logitsMemory);
    this.logitsMemory = undefined;
    this.logits = new Float32Array(0);
    for (const view of this.heldMemory.splice(0)) this.kernels.release?.(view);
  }

  /** Checks the batch against the model and cache; returns each sequence's cached length after it. */
  private validate(batch: ForwardBatch, cache: KVCache): Map<number, number> {
    const { tokens, positions, seqIds, logitRows } = batch;
    const n = tokens.length;
    if (positions.length !== n || seqIds.length !== n) {
      throw invalid(`batch arrays differ in length: tokens ${n}, positions ${positions.length}, seqIds ${seqIds.length}`);
    }
    if (cache.keys.length !== this.config.numLayers || cache.kvDim !== this.config.numKVHeads * this.config.headDim) {
      throw invalid("the KV cache was made for a model of another shape");
    }
    const lengths = new Map<number, number>();
    for (let t = 0; t < n; t++) {
      const token = tokens[t]!;
      const seq = seqIds[t]!;
      const position = positions[t]!;
      if (token < 0 || token >= this.config.vocabSize) {
        throw invalid(`token id ${token} at batch row ${t} is outside the vocabulary (0 .. ${this.config.vocabSize - 1})`);
      }
      if (seq < 0 || seq >= cache.numSeqs) {
        throw invalid(`sequence ${seq} at batch row ${t} is not a KV cache slot (0 .. ${cache.numSeqs - 1})`);
      }
      if (position >= cache.contextLength) {
        throw new InferenceError(
          "CONTEXT_OVERFLOW",
          `position ${position} does not fit the KV cache's ${cache.contextLength} positions`,
          { details: { position, contextLength: cache.contextLength } },
        );
      }
      // Positions of one sequence follow on from its cache with no gap, in increasing order.
      const cached = lengths.get(seq) ?? cache.length(seq);
      const previous = lengths.has(seq) ? cached - 1 : -1;
      if (position < 0 || position > cached || position <= previous) {
        throw invalid(
          `position ${position} of sequence ${seq} at batch row ${t} does not follow on from its ${cached} cached positions`,
        );
      }
      lengths.set(seq, position + 1);
    }
    for (const row of logitRows) {
      if (row < 0 || row >= n) throw invalid(`logit row ${row} is outside the batch of ${n} tokens`);
    }
    return lengths;
  }
}

function invalid(message: string): InferenceError {
  return new InferenceError("INVALID_OPTION", message);
}
