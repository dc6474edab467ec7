/**
 * The light numeric steps of the forward pass (norms, RoPE, activations,
 * softmax). Sums run in float64. They read plain float32 arrays only (the
 * embedding lookup, which reads a stored matrix, is dequant.ts's), so the
 * Kernels interface in types.ts can name them without an import cycle.
 */

/**
 * RMSNorm over `rows` rows of `dim`: out = x / sqrt(mean(x²) + eps) * w.
 * `unitOffset` = 1 gives Gemma's (1 + w) weighting. out may alias x.
 */
export function rmsNorm(out: Float32Array, x: Float32Array, weight: Float32Array, rows: number, dim: number, eps: number, unitOffset = 0): void {
  for (let r = 0; r < rows; r++) {
    const base = r * dim;
    const inverse = 1 / Math.sqrt(sumOfSquares(x, base, dim) / dim + eps);
    for (let i = 0; i < dim; i++) out[base + i] = x[base + i]! * inverse * (unitOffset + weight[i]!);
  }
}

/**
 * x[base + i]² summed over i < dim in float64, as four running sums of every
 * fourth element, ((s0 + s2) + (s1 + s3)) + the rest: the order the SIMD
 * kernel (assembly/elementwise.ts) adds in, so both give the same bits.
 */
function sumOfSquares(x: Float32Array, base: number, dim: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 4 <= dim; i += 4) {
    s0 += x[base + i]! * x[base + i]!;
    s1 += x[base + i + 1]! * x[base + i + 1]!;
    s2 += x[base + i + 2]! * x[base + i + 2]!;
    s3 += x[base + i + 3]! * x[base + i + 3]!;
  }
  let sum = s0 + s2 + (s1 + s3);
  for (; i < dim; i++) sum += x[base + i]! * x[base + i]!;
  return sum;
}

/**
 * llama.cpp's two RoPE layouts. "normal" rotates adjacent pairs (x[2i], x[2i+1])
 * (GGUF llama, whose q/k rows the converter permuted); "neox" rotates
 * (x[i], x[i + rotaryDim/2]) (Hugging Face rotate_half; GGUF qwen2/qwen3/gemma3/phi3).
 */
export type RopeMode = "normal" | "neox";

/**
 * Rotates the first `rotaryDim` dims of each head of x: [tokens, heads, headDim],
 * token t by angle positions[t] * inverseFrequencies[i] for pair i, and scales
 * the rotated dims by `magnitude` (LongRoPE's attention factor; 1 otherwise).
 */
export function applyRope(
  x: Float32Array,
  tokens: number,
  heads: number,
  headDim: number,
  positions: Int32Array,
  inverseFrequencies: Float64Array,
  mode: RopeMode,
  magnitude = 1,
): void {
  const pairs = inverseFrequencies.length; // rotaryDim / 2
  const { cos, sin } = rotationTable(tokens, positions, inverseFrequencies, magnitude);
  for (let t = 0; t < tokens; t++) {
    const row = t * pairs;
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < pairs; i++) {
        const a = mode === "normal" ? base + 2 * i : base + i;
        const b = mode === "normal" ? a + 1 : a + pairs;
        const x0 = x[a]!;
        const x1 = x[b]!;
        x[a] = x0 * cos[row + i]! - x1 * sin[row + i]!;
        x[b] = x0 * sin[row + i]! + x1 * cos[row + i]!;
      }
    }
  }
}

/**
 * cos and sin (times magnitude) of every token's angles, [tokens, pairs]. A forward
 * pass rotates q and k of every layer at the same positions, so the last table
 * is kept and reused while positions, frequencies (the same array, never changed
 * in place: callers build one per RoPE setting) and magnitude stay the same
 * (a decode step: 2 x layers calls, one table).
 */
export function rotationTable(tokens: number, positions: Int32Array, inverseFrequencies: Float64Array, magnitude: number): { cos: Float64Array; sin: Float64Array } {
  const pairs = inverseFrequencies.length;
  const last = lastRotation;
  if (last && last.inverseFrequencies === inverseFrequencies && last.magnitude === magnitude && last.tokens === tokens && samePositions(last.positions, positions, tokens)) {
    return last;
  }
  const cos = new Float64Array(tokens * pairs);
  const sin = new Float64Array(tokens * pairs);
  for (let t = 0; t < tokens; t++) {
    const position = positions[t]!;
    for (let i = 0; i < pairs; i++) {
      const angle = position * inverseFrequencies[i]!;
      cos[t * pairs + i] = Math.cos(angle) * magnitude;
      sin[t * pairs + i] = Math.sin(angle) * magnitude;
    }
  }
  lastRotation = { inverseFrequencies, magnitude, tokens, positions: positions.slice(0, tokens), cos, sin };
  return lastRotation;
}

let lastRotation:
  | { inverseFrequencies: Float64Array; magnitude: number; tokens: number; positions: Int32Array; cos: Float64Array; sin: Float64Array }
  | undefined;

function samePositions(a: Int32Array, b: Int32Array, tokens: number): boolean {
  for (let t = 0; t < tokens; t++) if (a[t] !== b[t]) return false;
  return true;
}

/** In-place softmax of x[offset .. offset + length). */
export function softmax(x: Float32Array, offset = 0, length = x.length - offset): void {
  let max = -Infinity;
  for (let i = 0; i < length; i++) max = Math.max(max, x[offset + i]!);
  let total = 0;
  for (let i = 0; i < length; i++) {
    const e = Math.exp(x[offset + i]! - max);
    x[offset + i] = e;
    total += e;
  }
  for (let i = 0; i < length; i++) x[offset + i] = x[offset + i]! / total;
}

export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
/** The tanh approximation of GELU (gelu_pytorch_tanh). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

export type Activation = "silu" | "gelu_tanh";

/** out[i] = act(gate[i]) * up[i] for i < count (the gated MLP's middle). out may alias gate or up. */
export function gatedActivation(
  out: Float32Array,
  gate: Float32Array,
  up: Float32Array,
  count: number,
  activation: Activation,
): void {
  const act = activation === "silu" ? silu : geluTanh;
  for (let i = 0; i < count; i++) out[i] = act(gate[i]!) * up[i]!;
}

/** x[r, :] += bias for each of `rows` rows. */
export function addBias(x: Float32Array, bias: Float32Array, rows: number): void {
  const dim = bias.length;
  for (let r = 0; r < rows; r++) {
    const base = r * dim;
    for (let i = 0; i < dim; i++) x[base + i] = x[base + i]! + bias[i]!;
  }
}

/** x[i] += y[i] for i < count. */
export function addInPlace(x: Float32Array, y: Float32Array, count = x.length): void {
  for (let i = 0; i < count; i++) x[i] = x[i]! + y[i]!;
}
