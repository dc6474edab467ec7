/**
 * Probes let a caller watch a model work: each token, a summary of the logits
 * behind it, attention, memory and training steps. Sinks are passed as
 * `LoadOptions.probe`; a backend emits through a `ProbeBus`, which never lets a
 * failing sink break generation.
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

export interface MemoryPayload {
  activeBytes: number;
  peakBytes: number;
  kvCacheBytes?: number;
}

export interface TrainingPayload {
  step: number;
  loss: number;
  learningRate?: number;
  gradNorm?: number;
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
  [K in ProbeKind]: { kind: K; phase: ProbePhase; step: number; payload: ProbePayloads[K] };
}[ProbeKind];

export type ProbeSink = ((event: ProbeEvent) => void) | { emit(event: ProbeEvent): void; kinds?: ProbeKind[] };

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
