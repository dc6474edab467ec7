// Shared pieces of the kernel tests: seeded random data, ggml-encoded random
// matrices, and the error bounds the WebAssembly kernels are held to.
import assert from "node:assert/strict";
import { isInferenceError, type ErrorCode } from "@infer/core";
import { seededRandom } from "@infer/core/testing";
import { dequantize, quantize, GgmlType } from "@infer/formats";
import { plainTypeOf, type AttentionParams, type WeightMatrix } from "../../src/kernels/types.js";

/** Deterministic pseudo-random numbers in [0, 1): the shared seeded generator, under the name these tests use. */
export const random = seededRandom;

/** A [rows, cols] matrix of `type` from random values whose scale varies by row, as ggml would store it. */
export function randomMatrix(type: GgmlType, rows: number, cols: number, next: () => number): WeightMatrix {
  const values = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const scale = 0.05 + next() * 2;
    for (let c = 0; c < cols; c++) values[r * cols + c] = (next() * 2 - 1) * scale;
  }
  return { type, rows, cols, data: quantize(type, values) };
}

/** Random activations in [-2, 2) with a few outliers, like hidden states. */
export function randomActivations(count: number, next: () => number): Float32Array {
  const x = new Float32Array(count);
  for (let i = 0; i < count; i++) x[i] = (next() * 2 - 1) * (next() < 0.02 ? 20 : 2);
  return x;
}

/**
 * Activations the kernels' int8 activation quantization (blocks of 32, scale
 * amax / 127) represents exactly: each block is q * 2^k for integers |q| <= 127
 * with one |q| = 127, so quantizing them loses nothing and any difference from
 * the reference is the kernel's own arithmetic.
 */
export function exactlyQuantizableActivations(count: number, next: () => number): Float32Array {
  const x = new Float32Array(count);
  for (let block = 0; block < count; block += 32) {
    const step = 2 ** (Math.floor(next() * 11) - 8);
    for (let i = 0; i < 32; i++) x[block + i] = (Math.floor(next() * 255) - 127) * step;
    x[block + Math.floor(next() * 32)] = (next() < 0.5 ? -127 : 127) * step;
  }
  return x;
}

/** Bytes per block of the types with a per-block minimum (an f16 at bytes 2..3 of each block). */
const MINIMUM_BLOCK_BYTES: ReadonlyMap<GgmlType, number> = new Map([
  [GgmlType.Q4_K, 144],
  [GgmlType.Q5_K, 176],
  [GgmlType.Q4_1, 20],
  [GgmlType.Q5_1, 24],
]);

/**
 * Row r's weights split as w = scaled - offset: `scaled` is the part multiplied
 * by quantized activations (d * sc * q), `offset` the per-block minimum Q4_K,
 * Q5_K, Q4_1 and Q5_1 subtract or add (multiplied by exact float sums of x); zeroing
 * each block's minimum (the K-quants' dmin, the others' m: bytes 2..3) leaves the scaled part.
 */
export function weightParts(w: WeightMatrix): { weights: Float32Array; scaled: Float32Array } {
  const type = storedType(w);
  const weights = dequantize(type, w.data, w.rows * w.cols);
  const blockBytes = MINIMUM_BLOCK_BYTES.get(type);
  if (blockBytes === undefined) return { weights, scaled: weights };
  const withoutMin = w.data.slice();
  for (let at = 0; at < withoutMin.length; at += blockBytes) withoutMin[at + 2] = withoutMin[at + 3] = 0;
  return { weights, scaled: dequantize(type, withoutMin, w.rows * w.cols) };
}

/** The matrix's ggml type: the references here read stored types, not the kernels' own layouts. */
function storedType(w: WeightMatrix): GgmlType {
  assert.equal(plainTypeOf(w.type), w.type, `a matrix in a kernel layout (${w.type}) has no reference here`);
  return w.type as GgmlType;
}

const F32_EPSILON = 2 ** -23;

/**
 * Per output, how far the WebAssembly kernel may be from the float64 reference.
 *
 * Arithmetic: the kernels add in float32, in at most cols / 8 + 16 roundings per
 * lane (products, block scales, partial sums), each at most 2^-24 of the running
 * magnitude, bounded by sum_c |term_c| where a term is scaled_c * x_c plus, for
 * Q4_K, the minimum's offset_c * x_c: (cols / 8 + 16) * 2^-23 * that sum.
 *
 * Activation quantization (quantized types only): each x is rounded to the
 * nearest multiple of its block's step amax / 127, an error of at most
 * amax / 254, which the scaled weight multiplies: sum_c |scaled_c| * amax_c / 254
 * (the whole weight for Q4_1 and Q5_1, whose minimum meets the quantized
 * activations too, as llama.cpp's does). Float types read x as is and get no such term.
 */
export function errorBounds(w: WeightMatrix, x: Float32Array, batch: number, quantizedActivations: boolean): Float64Array {
  const { rows, cols } = w;
  const { weights, scaled } = weightParts(w);
  const bounds = new Float64Array(batch * rows);
  const roundings = (cols / 8 + 16) * F32_EPSILON;
  const offsetQuantized = w.type === GgmlType.Q4_1 || w.type === GgmlType.Q5_1;
  const blockMax = new Float64Array(cols / 32); // [cols / 32]: amax of each activation block
  for (let b = 0; b < batch; b++) {
    const xBase = b * cols;
    for (let c = 0; quantizedActivations && c < cols; c++) {
      const block = Math.floor(c / 32);
      blockMax[block] = Math.max(c % 32 === 0 ? 0 : blockMax[block]!, Math.abs(x[xBase + c]!));
    }
    for (let r = 0; r < rows; r++) {
      const wBase = r * cols;
      let magnitude = 0;
      let activationError = 0;
      for (let c = 0; c < cols; c++) {
        const xc = Math.abs(x[xBase + c]!);
        const s = scaled[wBase + c]!;
        magnitude += (Math.abs(s) + Math.abs(s - weights[wBase + c]!)) * xc;
        if (quantizedActivations) activationError += (Math.abs(offsetQuantized ? weights[wBase + c]! : s) * blockMax[Math.floor(c / 32)]!) / 254;
      }
      bounds[b * rows + r] = roundings * magnitude + activationError * (1 + 1e-6) + 1e-30;
    }
  }
  return bounds;
}

export function assertWithin(actual: Float32Array, expected: Float32Array, bounds: Float64Array, what: string): void {
  for (let i = 0; i < bounds.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    if (!(error <= bounds[i]!)) {
      assert.fail(`${what}: out[${i}] = ${actual[i]}, reference ${expected[i]}, error ${error} > bound ${bounds[i]}`);
    }
  }
}

export function assertInferenceError(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isInferenceError(error, code), `expected InferenceError ${code}, got ${String(error)}`);
    if (pattern) assert.match((error as Error).message, pattern);
    return true;
  });
}

/**
 * Per output element, the distance allowed from the float64 reference. A score
 * is a float32 dot product of headDim terms: off by at most
 * (headDim / 4 + 8) * 2^-23 * scale * sum_d |q_d k_d| (soft-capping's tanh only
 * shrinks differences). Logits off by at most δ move the softmax weights by at
 * most 2δ in total (to first order; 2.2δ allowed), so the output moves by at most
 * max|v| * 2.2δ, plus float32 accumulation over the positions:
 * (positions + 8) * 2^-23 * max|v|.
 */
export function attentionBound(q: Float32Array, keys: Float32Array, values: Float32Array, p: AttentionParams, t: number, h: number): number {
  const group = p.numHeads / p.numKVHeads;
  const kvStride = p.numKVHeads * p.headDim;
  const position = p.positions[t]!;
  const first = p.window > 0 ? Math.max(0, position - p.window + 1) : 0;
  const qBase = (t * p.numHeads + h) * p.headDim;
  let worstDot = 0;
  let maxValue = 0;
  for (let j = first; j <= position; j++) {
    const base = (p.seqIds[t]! * p.slotLength + j) * kvStride + Math.floor(h / group) * p.headDim;
    let dot = 0;
    for (let d = 0; d < p.headDim; d++) {
      dot += Math.abs(q[qBase + d]! * keys[base + d]!);
      maxValue = Math.max(maxValue, Math.abs(values[base + d]!));
    }
    worstDot = Math.max(worstDot, dot);
  }
  const eps = 2 ** -23;
  const logitError = (p.headDim / 4 + 8) * eps * p.scale * worstDot;
  return maxValue * (2.2 * logitError + (position - first + 9) * eps);
}
