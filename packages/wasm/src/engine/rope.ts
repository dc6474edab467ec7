/** RoPE frequencies: the plain base-θ schedule and the scalings applied on top of it. */
import { InferenceError } from "@infer/core";

export type RopeScaling =
  | { type: "none" }
  /** Positions divided by `factor` (HF rope_type "linear"; GGUF rope.scaling.type "linear"). */
  | { type: "linear"; factor: number }
  /** Llama 3.1's frequency-dependent scaling (HF rope_scaling.rope_type "llama3"). */
  | { type: "llama3"; factor: number; lowFreqFactor: number; highFreqFactor: number; originalContextLength: number }
  /**
   * Phi-3's LongRoPE: per-pair divisors (short ones up to originalContextLength
   * positions, long ones beyond) and a magnitude on the rotated dims. GGUF keeps
   * the factors as tensors (rope_factors_short/long.weight), so they may be absent here.
   */
  | {
      type: "longrope";
      shortFactors?: number[];
      longFactors?: number[];
      originalContextLength: number;
      attentionFactor: number;
    };

/**
 * Inverse frequency of each rotated pair i < rotaryDim / 2: θ^(-2i / rotaryDim),
 * then scaled. `freqFactors` (GGUF rope_freqs.weight, [rotaryDim / 2]) divide them,
 * which is how llama.cpp stores Llama 3.1's scaling.
 */
export function ropeInverseFrequencies(
  rotaryDim: number,
  theta: number,
  scaling: RopeScaling,
  freqFactors?: Float32Array,
): Float64Array {
  const pairs = rotaryDim / 2;
  if (freqFactors && freqFactors.length !== pairs) {
    throw new InferenceError("MODEL_FORMAT", `rope_freqs.weight has ${freqFactors.length} factors, expected ${pairs}`);
  }
  const inverse = new Float64Array(pairs); // [rotaryDim / 2]
  for (let i = 0; i < pairs; i++) {
    let frequency = 1 / theta ** ((2 * i) / rotaryDim);
    if (freqFactors) frequency /= freqFactors[i]!;
    inverse[i] = scaleFrequency(frequency, scaling);
  }
  return inverse;
}

function scaleFrequency(frequency: number, scaling: RopeScaling): number {
  switch (scaling.type) {
    case "none":
    case "longrope": // its factors come in as freqFactors
      return frequency;
    case "linear":
      return frequency / scaling.factor;
    case "llama3": {
      const { factor, lowFreqFactor, highFreqFactor, originalContextLength } = scaling;
      const wavelength = (2 * Math.PI) / frequency;
      const lowFreqWavelength = originalContextLength / lowFreqFactor;
      const highFreqWavelength = originalContextLength / highFreqFactor;
      if (wavelength < highFreqWavelength) return frequency;
      if (wavelength > lowFreqWavelength) return frequency / factor;
      const smooth = (originalContextLength / wavelength - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      return (1 - smooth) * (frequency / factor) + smooth * frequency;
    }
  }
}
