import { InferenceError } from "./errors.js";

/**
 * Probes let a caller watch a model work: each token, a summary of the logits
 * behind it, attention, memory and training steps. Sinks are passed as
 * `LoadOptions.probe` (or attached later, see `ProbedModel`); a backend emits
 * through a `ProbeBus`, which never lets a failing sink break generation.
 *
 * Where each kind is emitted:
 *  - `token`, `logits`: each generated token of `generate`/`chat` and of every
 *    sequence of `batchGenerate` (the event's `sequence` is the prompt's index).
 *  - `attention`: per layer for each generated token, only when a sink asks for
 *    it in `kinds` (or takes every kind) and the backend has the
 *    `probe.attention` capability; a backend that cannot see attention emits none.
 *  - `memory`: once at the end of every call (generation, batch, classify),
 *    with the call's peak and the bytes still held; it is a call's last event.
 *  - `training`: each optimizer step of a trainer, through `emitTrainingStep`.
 *
 * `step` counts from 0 at each call's first token (per sequence in a batch);
 * the token, its logits and its attention share one step.
 */
export type ProbePhase = "prefill" | "decode" | "training";

export interface TokenPayload {
  id: number;
  text: string;
  /** Position of the token in the sequence. */
  position: number;
}

export interface LogitsSummaryPayload {
  /** Ids of the k most likely tokens, most likely first. */
  topIds: number[];
  /** Their logits, in the same order. */
  topLogits: number[];
  /** Entropy of the softmax over the whole vocabulary, in nats. */
  entropy: number;
  vocabSize: number;
}

export interface AttentionPayload {
  layer: number;
  /** Attention weights of each query head over the positions so far: [numQueryHeads][seqLen]. */
  weights: Float32Array[];
}

/** The call's memory, as the backend measures it (the same figures as `GenerateMetrics`). */
export interface MemoryPayload {
  /** Bytes held for the model when the call ended. */
  activeBytes: number;
  /** Most bytes held at once during the call; never below `activeBytes`. */
  peakBytes: number;
  /** Of `activeBytes`: the weights as held, and the KV cache, when the backend knows them. */
  weightBytes?: number;
  kvCacheBytes?: number;
}

export interface TrainingPayload {
  /** The optimizer's step over the whole training run. */
  step: number;
  loss: number;
  learningRate?: number;
  /** The gradients' global L2 norm before clipping. */
  gradNorm?: number;
  /** Counted targets a second over the step. */
  tokensPerSecond?: number;
}

export interface ProbePayloads {
  token: TokenPayload;
  logits: LogitsSummaryPayload;
  attention: AttentionPayload;
  memory: MemoryPayload;
  training: TrainingPayload;
}

export type ProbeKind = keyof ProbePayloads;

export type ProbeEvent = {
  [K in ProbeKind]: {
    kind: K;
    phase: ProbePhase;
    /** From 0 at the call's first token, per sequence; for `memory`, the most tokens one sequence of the call generated. */
    step: number;
    /**
     * In `batchGenerate`, the prompt's index among those that reached the backend (the same
     * index unless an earlier chat prompt failed to render); absent for single-stream calls.
     */
    sequence?: number;
    /** Milliseconds since the call began, when the backend emits through a `ProbeCall`. */
    elapsedMs?: number;
    payload: ProbePayloads[K];
  };
}[ProbeKind];

export type ProbeSink = ((event: ProbeEvent) => void) | { emit(event: ProbeEvent): void; kinds?: ProbeKind[] };

/** A model whose probe sinks can be added after load (a server registering its metrics sink, say). */
export interface ProbedModel {
  /** Adds `sink` to the model's bus; the returned function removes it. */
  attachProbe(sink: ProbeSink): () => void;
}

export function isProbedModel(model: object): model is ProbedModel {
  return typeof (model as Partial<ProbedModel>).attachProbe === "function";
}

/**
 * Fans events out to sinks. A throwing sink never breaks generation: its first
 * error is kept on `errors` (one entry per failing sink, so a sink failing on
 * every token cannot grow it without bound) and it keeps receiving events.
 */
export class ProbeBus {
  readonly errors: unknown[] = [];
  private readonly sinks: ProbeSink[];
  private readonly failed = new Set<ProbeSink>();

  constructor(sinks: ProbeSink | ProbeSink[] | undefined) {
    this.sinks = sinks === undefined ? [] : Array.isArray(sinks) ? [...sinks] : [sinks];
  }

  /** Adds a sink; the returned function removes it (errors it already caused stay on `errors`). */
  attach(sink: ProbeSink): () => void {
    this.sinks.push(sink);
    return () => {
      const at = this.sinks.indexOf(sink);
      if (at >= 0) this.sinks.splice(at, 1);
    };
  }

  /** Starts one call's emissions: its events carry the time since now. */
  call(): ProbeCall {
    return new ProbeCall(this);
  }

  /** True when at least one sink listens; backends skip building payloads otherwise. */
  get active(): boolean {
    return this.sinks.length > 0;
  }

  wants(kind: ProbeKind): boolean {
    return this.sinks.some((s) => typeof s === "function" || s.kinds === undefined || s.kinds.includes(kind));
  }

  emit(event: ProbeEvent): void {
    for (const sink of this.sinks) {
      try {
        if (typeof sink === "function") sink(event);
        else if (sink.kinds === undefined || sink.kinds.includes(event.kind)) sink.emit(event);
      } catch (error) {
        if (this.failed.has(sink)) continue;
        this.failed.add(sink);
        this.errors.push(error);
      }
    }
  }
}

/**
 * The events of one model call: each gets `elapsedMs` since the call began
 * (so sinks derive time to first token and per-token latency) and, in a batch,
 * its sequence.
 */
export class ProbeCall {
  private readonly started = performance.now();

  constructor(private readonly bus: ProbeBus) {}

  get active(): boolean {
    return this.bus.active;
  }

  wants(kind: ProbeKind): boolean {
    return this.bus.active && this.bus.wants(kind);
  }

  emit<K extends ProbeKind>(kind: K, phase: ProbePhase, step: number, payload: ProbePayloads[K], sequence?: number): void {
    const event = { kind, phase, step, elapsedMs: performance.now() - this.started, payload } as ProbeEvent;
    if (sequence !== undefined) event.sequence = sequence;
    this.bus.emit(event);
  }
}

/**
 * What a trainer calls after each optimizer step: one `training` event, whose
 * event `step` counts the call's steps from 0 and whose payload's `step` is the
 * optimizer's step over the whole run. The emit site lands with the trainer
 * (LoRA training); the contract and this path are fixed here so sinks can
 * rely on them.
 */
export function emitTrainingStep(call: ProbeCall, callStep: number, payload: TrainingPayload): void {
  if (!Number.isInteger(payload.step) || payload.step < 0) {
    throw new InferenceError("INVALID_OPTION", `training step must be a non-negative integer, got ${payload.step}`, {
      details: { field: "step", value: payload.step },
    });
  }
  if (!call.wants("training")) return;
  call.emit("training", "training", callStep, { ...payload });
}

/** Top-k ids and logits plus entropy: what a probe sees instead of the whole vocabulary. */
export function summarizeLogits(logits: ArrayLike<number>, k = 5): LogitsSummaryPayload {
  const n = logits.length;
  const count = Math.min(k, n);
  const top: number[] = [];
  for (let i = 0; i < n; i++) {
    if (top.length < count || logits[i]! > logits[top[top.length - 1]!]!) {
      let at = top.length < count ? top.length : count - 1;
      top[at] = i;
      while (at > 0 && logits[top[at]!]! > logits[top[at - 1]!]!) {
        [top[at], top[at - 1]] = [top[at - 1]!, top[at]!];
        at--;
      }
    }
  }
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  let weighted = 0;
  for (let i = 0; i < n; i++) {
    const shifted = logits[i]! - max;
    const e = Math.exp(shifted);
    // Masked tokens (logit -Infinity) have probability 0 and add nothing; 0 * -Infinity would be NaN.
    if (e === 0) continue;
    sum += e;
    weighted += e * shifted;
  }
  // H = log(sum) - E[shifted], with shifted logits for stability.
  const entropy = n === 0 ? 0 : Math.log(sum) - weighted / sum;
  return { topIds: top, topLogits: top.map((i) => logits[i]!), entropy, vocabSize: n };
}
