import type { SamplerSettings } from "./sampling.js";

/**
 * Picks tokens from raw logits in JavaScript, for the logprobs path only.
 *
 * Why not llama.cpp's sampler: node-llama-cpp hands out a step's logits only
 * as they are after its sampler chain (top-k cut, divided by the temperature),
 * while logprobs must describe the model's own distribution. The logprobs path
 * therefore asks llama.cpp for the raw logits with a greedy (non-modifying)
 * chain and samples here, following llama.cpp's default order: repeat
 * penalty, top-k, top-p, min-p, temperature, draw.
 *
 * Consequences: temperature 0 gives exactly llama.cpp's greedy tokens (argmax,
 * first id on ties, as its greedy sampler). A seed makes this path repeat
 * itself, but it draws with its own generator, not llama.cpp's mt19937, so it
 * does not reproduce the tokens the normal path samples with the same seed.
 */
export class LogitSampler {
  private readonly random: () => number;

  constructor(private readonly settings: SamplerSettings) {
    this.random = seededUniform(settings.seed);
  }

  /** The next id; `recent` are the ids the repeat penalty looks at. `logits` is left untouched. */
  sample(logits: Float32Array, recent: readonly number[]): number {
    const { temperature, topK, topP, minP, repeatPenalty, repeatLastN } = this.settings;
    const scores = penalized(logits, repeatPenalty, repeatLastN > 0 ? recent.slice(-repeatLastN) : []);
    if (temperature <= 0) return argmax(scores);

    // Candidates best first (ties: lower id first, a stable order on every engine).
    let candidates =
      topK > 0 && topK < scores.length
        ? topIds(scores, topK)
        : Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]! || a - b);
    const best = scores[candidates[0]!]!;
    // Probabilities of the survivors, untempered, as llama.cpp's filters see them.
    let weights = candidates.map((id) => Math.exp(scores[id]! - best));
    if (topP < 1) {
      const total = sum(weights);
      let cumulative = 0;
      let keep = candidates.length;
      for (let i = 0; i < weights.length; i++) {
        cumulative += weights[i]! / total;
        if (cumulative >= topP) {
          keep = i + 1;
          break;
        }
      }
      candidates = candidates.slice(0, keep);
      weights = weights.slice(0, keep);
    }
    if (minP > 0) {
      // weights[0] is the best survivor's exp(0) = 1, so this compares p / p_max with minP.
      const keep = weights.findIndex((w) => w < minP);
      if (keep > 0) candidates = candidates.slice(0, keep);
    }
    const tempered = candidates.map((id) => Math.exp((scores[id]! - best) / temperature));
    let r = this.random() * sum(tempered);
    for (let i = 0; i < candidates.length; i++) {
      r -= tempered[i]!;
      if (r < 0) return candidates[i]!;
    }
    return candidates[candidates.length - 1]!;
  }
}

/**
 * A copy of `logits` with llama.cpp's repeat penalty: each recently seen id's
 * positive logit divided by the penalty, a negative one multiplied.
 */
function penalized(logits: Float32Array, penalty: number, recent: readonly number[]): Float32Array {
  const scores = Float32Array.from(logits);
  if (penalty === 1) return scores;
  for (const id of new Set(recent)) {
    if (id < 0 || id >= scores.length) continue;
    const v = scores[id]!;
    scores[id] = v > 0 ? v / penalty : v * penalty;
  }
  return scores;
}

/**
 * The `k` ids with the highest values, best first, lower id first on ties
 * (so under greedy the first is the argmax). One pass with a sorted list of
 * at most k entries: O(n k), cheap for the small k of logprobs and top-k.
 */
export function topIds(values: ArrayLike<number>, k: number): number[] {
  const count = Math.min(k, values.length);
  const top: number[] = [];
  if (count <= 0) return top;
  for (let id = 0; id < values.length; id++) {
    const v = values[id]!;
    // Strictly greater: an equal later id never displaces an earlier one.
    if (top.length === count && !(v > values[top[count - 1]!]!)) continue;
    let at = top.length === count ? count - 1 : top.length;
    while (at > 0 && v > values[top[at - 1]!]!) {
      top[at] = top[at - 1]!;
      at--;
    }
    top[at] = id;
  }
  return top;
}

/** Index of the largest value, the first one on ties. */
export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/**
 * Uniform numbers in [0, 1) from a 32-bit seed state stepped by the golden
 * ratio and mixed (a splitmix-style generator): 32-bit integer arithmetic
 * only, so the same seed gives the same draws on every machine.
 */
export function seededUniform(seed: number): () => number {
  let state = (seed >>> 0) ^ Math.floor(seed / 0x1_0000_0000);
  return () => {
    state = (state + 0x9e3779b9) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
    return ((z ^ (z >>> 15)) >>> 0) / 0x1_0000_0000;
  };
}
