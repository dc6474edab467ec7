import { Rng, sampleToken } from "@infer/core";
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
 * itself, but it draws with the contract's generator (`Rng`, the one the wasm
 * engine uses), not llama.cpp's mt19937, so it does not reproduce the tokens
 * the normal path samples with the same seed.
 */
export class LogitSampler {
  private readonly rng: Rng;

  constructor(private readonly settings: SamplerSettings) {
    this.rng = new Rng(settings.seed);
  }

  /** The next id; `recent` are the ids the repeat penalty looks at. `logits` is left untouched. */
  sample(logits: Float32Array, recent: readonly number[]): number {
    const { repeatLastN } = this.settings;
    const window = repeatLastN > 0 ? recent.slice(-repeatLastN) : [];
    // The shared sampler applies the penalty in place: it works on a copy.
    return sampleToken(Float32Array.from(logits), this.settings, this.rng, window);
  }
}
