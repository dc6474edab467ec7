import {
  type FinishReason,
  InferenceError,
  Rng,
  type SamplerSettings,
  sampleToken,
  scoreToken,
  type Token,
} from "@infer/core";
import { attentionWeights } from "../engine/attention-weights.js";
import type { KVCache, QueryObserver, Transformer } from "../engine/transformer.js";

/** What the decoding loop needs from a tokenizer. */
export interface StreamingDetokenizer {
  push(id: number): string;
  /** Text still held back (a partial UTF-8 character), as `decode` would render it. */
  flush(): string;
}

export interface SequenceRequest {
  /** Prompt token ids (BOS included when the model wants it). */
  promptIds: number[];
  sampler: SamplerSettings;
  seed: number;
  /** Ids that end the sequence without being emitted (EOS ids unless ignored, plus stop tokens). */
  endIds: Set<number>;
  /** Ends the sequence ("length") with the detokenizer's held bytes in its last token; stop strings are BaseTextModel's. */
  maxTokens?: number;
  detokenizer: StreamingDetokenizer;
  /** Keep a copy of each step's raw logits (before the repeat penalty) in `lastLogits`. */
  captureLogits?: boolean;
  /** Keep the attention weights of each sampled position, per layer, in `lastAttention`. */
  captureAttention?: boolean;
  /** Attach log-probabilities to tokens, with this many alternatives; `tokenText` names them. */
  logprobs?: number;
  tokenText?: (id: number) => string;
}

/**
 * One sequence being decoded in a KV-cache slot: it ends itself on an end id,
 * `maxTokens` or the end of the context; its caller ends it earlier with
 * `close()` (a stop string matched).
 */
export class Sequence {
  readonly generatedIds: number[] = [];
  finishReason: FinishReason | undefined;
  /** Raw logits of the last sampled position, when the request asked to capture them. */
  lastLogits: Float32Array | undefined;
  /** lastAttention[layer][queryHead]: weights of the last sampled position over the positions so far, when asked. */
  lastAttention: Float32Array[][] | undefined;
  /** Tokens decoded since the caller last took them. */
  private ready: Token[] = [];
  private readonly rng: Rng;
  /** Ids fed to the model but not yet in the cache (the whole prompt at first, then the last sampled id). */
  pending: number[];
  /** Position of pending[0]. */
  position = 0;
  /** True until the prompt's last token has been through the model. */
  inPrompt = true;
  /** How many generated tokens probes have been told of (a step that ends on EOS generates none). */
  reported = 0;

  constructor(
    readonly slot: number,
    readonly request: SequenceRequest,
  ) {
    this.pending = [...request.promptIds];
    this.rng = new Rng(request.seed);
  }

  get done(): boolean {
    return this.finishReason !== undefined;
  }

  /** Takes the tokens decoded so far. */
  drain(): Token[] {
    const out = this.ready;
    this.ready = [];
    return out;
  }

  /** The caller is done with this sequence: no later step decodes it. */
  close(): void {
    this.finishReason ??= "stop";
    this.ready = [];
  }

  /** Consumes the logits for this sequence's last pending token: samples, checks the ends. */
  accept(logits: Float32Array, contextLength: number, argmaxOf?: (values: Float32Array) => number): void {
    const { sampler } = this.request;
    const recent = sampler.repeatPenalty !== 1 ? this.recentIds(sampler.repeatLastN) : [];
    if (this.request.captureLogits) this.lastLogits = Float32Array.from(logits);
    // Log-probabilities describe the model's distribution: kept from before the penalty changes the logits.
    const raw = this.request.logprobs === undefined ? undefined : Float32Array.from(logits);
    // Greedy decoding uses the kernels' argmax when they have one: a vocabulary of compares a token.
    const id = sampleToken(logits, sampler, this.rng, recent, argmaxOf);
    this.advance(this.pending.length);
    this.inPrompt = false;
    if (this.request.endIds.has(id)) {
      // A character left incomplete is rendered as decode renders it, with the end token.
      const rest = this.request.detokenizer.flush();
      if (rest) this.ready.push({ id, text: rest });
      this.finishReason = "stop";
      return;
    }
    this.generatedIds.push(id);
    const last = this.generatedIds.length >= (this.request.maxTokens ?? Infinity) || this.position >= contextLength;
    let text = this.request.detokenizer.push(id);
    if (last) text += this.request.detokenizer.flush();
    const token: Token = { id, text };
    if (raw) Object.assign(token, scoreToken(raw, id, this.request.logprobs!, this.request.tokenText ?? String));
    this.ready.push(token);
    // At maxTokens, or with no room in the cache for the sampled token.
    if (last) this.finishReason = "length";
    else this.pending = [id];
  }

  /** The last `n` ids of prompt and generated text, which the repeat penalty looks at. */
  private recentIds(n: number): number[] {
    if (n <= 0) return [];
    const generated = this.generatedIds.slice(-n);
    const fromPrompt = n - generated.length;
    return fromPrompt > 0 ? this.request.promptIds.slice(-fromPrompt).concat(generated) : generated;
  }

  /** The ids whose keys and values this sequence has written to its slot, in order. */
  cachedIds(): number[] {
    return this.request.promptIds.concat(this.generatedIds).slice(0, this.position);
  }

  /** Marks `count` pending tokens as written to the cache. */
  advance(count: number): void {
    this.position += count;
    this.pending = this.pending.slice(count);
  }
}

export interface StepTimings {
  prefillMs: number;
  decodeMs: number;
  promptTokens: number;
}

/**
 * Runs forward passes over every live sequence at once: one `forward` per
 * step carries the pending prompt tokens (prefill, in chunks) and the last
 * sampled token of each decoding sequence, so batched sequences decode
 * together, each finishing on its own.
 */
export class DecodeScheduler {
  readonly timings: StepTimings = { prefillMs: 0, decodeMs: 0, promptTokens: 0 };

  constructor(
    private readonly transformer: Transformer,
    private readonly cache: KVCache,
    private readonly contextLength: number,
    /** Most prompt tokens one step carries, so signals are checked and scratch memory stays bounded. */
    private readonly prefillChunk = 128,
  ) {}

  /**
   * Checks that a prompt fits the context; the slot keeps its first `reused`
   * positions (which hold the prompt's first ids: prefix reuse) and forgets the rest.
   */
  start(slot: number, request: SequenceRequest, reused = 0): Sequence {
    if (request.promptIds.length === 0) {
      throw new InferenceError("INVALID_OPTION", "the prompt encodes to no tokens and the model adds no BOS token");
    }
    if (request.promptIds.length > this.contextLength) {
      throw new InferenceError(
        "CONTEXT_OVERFLOW",
        `the prompt needs ${request.promptIds.length} tokens but the context holds ${this.contextLength}`,
        { details: { needed: request.promptIds.length, available: this.contextLength } },
      );
    }
    if (!Number.isInteger(reused) || reused < 0 || reused >= request.promptIds.length) {
      throw new InferenceError("INTERNAL", `a sequence cannot reuse ${reused} of its ${request.promptIds.length} prompt tokens`);
    }
    this.cache.setLength(slot, reused);
    const seq = new Sequence(slot, request);
    seq.advance(reused);
    return seq;
  }

  /** One forward pass over the live sequences; each gets its next token when its prompt is done. */
  step(sequences: Sequence[], signal?: AbortSignal): void {
    const live = sequences.filter((s) => !s.done);
    if (live.length === 0) return;
    const tokens: number[] = [];
    const positions: number[] = [];
    const seqIds: number[] = [];
    const logitRows: number[] = [];
    const fed = new Map<Sequence, number>();
    let budget = this.prefillChunk;
    let prefillTokens = 0;
    for (const seq of live) {
      // A decoding sequence always gets its one token; prompts share the chunk budget.
      let take = 1;
      if (seq.inPrompt) {
        take = Math.min(seq.pending.length, Math.max(1, budget));
        budget -= take;
        prefillTokens += take;
      }
      for (let i = 0; i < take; i++) {
        tokens.push(seq.pending[i]!);
        positions.push(seq.position + i);
        seqIds.push(seq.slot);
      }
      fed.set(seq, take);
      if (take === seq.pending.length) logitRows.push(tokens.length - 1);
    }
    signal?.throwIfAborted();
    const started = performance.now();
    const observe = this.attentionObserver(fed, positions, logitRows);
    const logits = this.transformer.forward(
      {
        tokens: Int32Array.from(tokens),
        positions: Int32Array.from(positions),
        seqIds: Int32Array.from(seqIds),
        logitRows: Int32Array.from(logitRows),
      },
      this.cache,
      // Reused by the next step: the sequences consume their rows within this one.
      this.transformer.logitsBuffer(logitRows.length),
      observe,
    );
    const vocab = this.transformer.config.vocabSize;
    let row = 0;
    for (const [seq, take] of fed) {
      if (take < seq.pending.length) {
        seq.advance(take); // part of a long prompt: no logits yet
      } else {
        seq.accept(logits.subarray(row * vocab, (row + 1) * vocab), this.contextLength, this.transformer.kernels.argmax);
        row++;
      }
    }
    const elapsed = performance.now() - started;
    if (prefillTokens > 0) {
      this.timings.prefillMs += elapsed;
      this.timings.promptTokens += prefillTokens;
    } else {
      this.timings.decodeMs += elapsed;
    }
  }

  /**
   * When a sequence that samples this step asked for attention, an observer
   * that stores, per layer, the weights of its sampled row into `lastAttention`;
   * otherwise none, so the forward pays nothing.
   */
  private attentionObserver(fed: Map<Sequence, number>, positions: number[], logitRows: number[]): QueryObserver | undefined {
    const watched: { seq: Sequence; row: number }[] = [];
    let next = 0;
    for (const [seq, take] of fed) {
      if (take < seq.pending.length) continue;
      const row = logitRows[next++]!;
      if (seq.request.captureAttention) watched.push({ seq, row });
    }
    if (watched.length === 0) return undefined;
    for (const { seq } of watched) seq.lastAttention = [];
    const { config } = this.transformer;
    return (layer, q, window) => {
      for (const { seq, row } of watched) {
        seq.lastAttention![layer] = attentionWeights(config, this.cache, layer, q, row, seq.slot, positions[row]!, window);
      }
    };
  }
}
