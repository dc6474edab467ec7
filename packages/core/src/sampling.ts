import { InferenceError } from "./errors.js";
import type { Token, TokenLogprob } from "./types.js";

/**
 * The sampler: turns one row of logits into a token id. It is kept apart from
 * any forward pass (which only produces logits), and lives in the contract so
 * every backend that samples in JavaScript (the wasm engine; llama_cpp when it
 * reports log-probabilities) picks tokens the same way.
 *
 * Order of steps follows llama.cpp's default chain: repeat penalty, top-k,
 * top-p, min-p, temperature, then a draw. Temperature 0 is argmax after the
 * penalty.
 */
export interface SamplerSettings {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repeatPenalty: number;
  repeatLastN: number;
}

/**
 * xoshiro128** seeded through splitmix32: a small generator that gives the
 * same sequence on every machine and JavaScript engine (only 32-bit integer
 * arithmetic), which `Math.random` cannot promise.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    let x = (seed >>> 0) ^ Math.floor(seed / 0x1_0000_0000);
    const next = () => {
      x = (x + 0x9e3779b9) | 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Next uint32. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** The generator's state: a generator given it by `restore` draws the same sequence from here on. */
  state(): [number, number, number, number] {
    return [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
  }

  restore(state: readonly number[]): void {
    if (state.length !== 4 || !state.every((word) => Number.isInteger(word) && word >= 0 && word <= 0xffff_ffff)) {
      throw new InferenceError("INVALID_OPTION", "an Rng state is four uint32 words", { details: { option: "rng", value: state } });
    }
    [this.s0, this.s1, this.s2, this.s3] = state.map((word) => word | 0) as [number, number, number, number];
  }

  /** Uniform in [0, 1) with 32 bits of resolution. */
  nextFloat(): number {
    return this.nextUint32() / 0x1_0000_0000;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** Index of the largest value (the first one on ties). */
export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < values.length; i++) {
    if (values[i]! > bestValue) {
      bestValue = values[i]!;
      best = i;
    }
  }
  return best;
}

/**
 * Applies the repeat penalty in place: positive logits of recently seen tokens
 * are divided by the penalty, negative ones multiplied (as llama.cpp does).
 */
export function applyRepeatPenalty(logits: Float32Array, recent: ArrayLike<number>, penalty: number): void {
  if (penalty === 1 || recent.length === 0) return;
  const seen = new Set<number>();
  for (let i = 0; i < recent.length; i++) seen.add(recent[i]!);
  for (const id of seen) {
    if (id < 0 || id >= logits.length) continue;
    const v = logits[id]!;
    logits[id] = v > 0 ? v / penalty : v * penalty;
  }
}

/** The `k` highest-logit ids, best first, found with a bounded min-heap (O(n log k)). */
export function topKIndices(logits: Float32Array, k: number): number[] {
  const heap: number[] = [];
  const less = (a: number, b: number) => logits[a]! < logits[b]! || (logits[a] === logits[b] && a > b);
  const siftDown = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  };
  for (let id = 0; id < logits.length; id++) {
    if (heap.length < k) {
      heap.push(id);
      for (let i = heap.length - 1; i > 0; ) {
        const parent = (i - 1) >> 1;
        if (!less(heap[i]!, heap[parent]!)) break;
        [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
        i = parent;
      }
    } else if (less(heap[0]!, id)) {
      heap[0] = id;
      siftDown(0);
    }
  }
  return heap.sort((a, b) => logits[b]! - logits[a]! || a - b);
}

/**
 * Picks the next token from `logits` (modified in place by the penalty).
 * `recent` holds the tokens the repeat penalty looks at. `greedyPick` finds the
 * largest logit when temperature is 0: a backend may pass a faster one that
 * gives `argmax`'s index (the first of equal largest values, NaNs skipped).
 */
export function sampleToken(
  logits: Float32Array,
  settings: SamplerSettings,
  rng: Rng,
  recent: ArrayLike<number> = [],
  greedyPick: (logits: Float32Array) => number = argmax,
): number {
  applyRepeatPenalty(logits, recent, settings.repeatPenalty);
  if (settings.temperature <= 0) return greedyPick(logits);

  // Candidates, best first. Without top-k, a min-p cut keeps the sort small.
  let candidates: number[];
  if (settings.topK > 0 && settings.topK < logits.length) {
    candidates = topKIndices(logits, settings.topK);
  } else {
    const max = logits[argmax(logits)]!;
    const floor = settings.minP > 0 ? max + Math.log(settings.minP) : -Infinity;
    candidates = [];
    for (let id = 0; id < logits.length; id++) if (logits[id]! >= floor) candidates.push(id);
    candidates.sort((a, b) => logits[b]! - logits[a]! || a - b);
  }

  // Probabilities over the candidates (before temperature, as llama.cpp's filters see them).
  const top = logits[candidates[0]!]!;
  let probs = candidates.map((id) => Math.exp(logits[id]! - top));
  let total = probs.reduce((a, b) => a + b, 0);

  if (settings.topP < 1) {
    let cumulative = 0;
    let keep = candidates.length;
    for (let i = 0; i < candidates.length; i++) {
      cumulative += probs[i]! / total;
      if (cumulative >= settings.topP) {
        keep = i + 1;
        break;
      }
    }
    candidates = candidates.slice(0, keep);
    probs = probs.slice(0, keep);
    total = probs.reduce((a, b) => a + b, 0);
  }
  if (settings.minP > 0) {
    // probs[0] is the top candidate's (unnormalised) probability, exp(0) = 1.
    const keep = probs.findIndex((p) => p < settings.minP);
    if (keep > 0) {
      candidates = candidates.slice(0, keep);
      probs = probs.slice(0, keep);
    }
  }

  const weights = candidates.map((id) => Math.exp((logits[id]! - top) / settings.temperature));
  const sum = weights.reduce((a, b) => a + b, 0);
  let r = rng.nextFloat() * sum;
  for (let i = 0; i < candidates.length; i++) {
    r -= weights[i]!;
    if (r < 0) return candidates[i]!;
  }
  return candidates[candidates.length - 1]!;
}

/**
 * log softmax(logits)[id] in nats, with the normaliser computed once. The
 * scorer reads `logits` when called: do not change them in between.
 */
export function logProbabilities(logits: ArrayLike<number>): (id: number) => number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  const logNorm = max + Math.log(sum);
  return (id) => logits[id]! - logNorm;
}

/**
 * What `GenerateOptions.logprobs` attaches to a token: its log-probability and
 * the `alternatives` most likely tokens (best first), from raw logits.
 */
export function scoreToken(
  logits: Float32Array,
  id: number,
  alternatives: number,
  textOf: (id: number) => string,
): Pick<Token, "logprob" | "topLogprobs"> {
  const score = logProbabilities(logits);
  const scored: Pick<Token, "logprob" | "topLogprobs"> = { logprob: score(id) };
  if (alternatives > 0) {
    scored.topLogprobs = topKIndices(logits, alternatives).map(
      (alt): TokenLogprob => ({ id: alt, text: textOf(alt), logprob: score(alt) }),
    );
  }
  return scored;
}
