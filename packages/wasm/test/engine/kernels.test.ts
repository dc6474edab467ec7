/**
 * The reference kernels against independent float64 formulas. Tolerances are
 * relative to 1 + |expected|: 1e-6 where only the final float32 rounding
 * differs, a little more where float32 inputs feed long sums.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { GgmlType, CODEC_TYPES, dequantize, typeName, quantize } from "@infer/formats";
import type { WeightMatrix } from "../../src/kernels/types.js";
import { referenceAttention, referenceMatmul } from "../../src/kernels/reference.js";
import { applyRope, gatedActivation, geluTanh, rmsNorm, silu, softmax } from "../../src/kernels/ops.js";
import { embeddingLookup } from "../../src/kernels/dequant.js";
import { ropeInverseFrequencies } from "../../src/engine/rope.js";
import { permuteForNormalRope } from "../../src/testing/random-models.js";
import { maxRelativeError, randomArray } from "./helpers.js";

/** out[b][r] = Σ_c W[r][c] x[b][c] in float64 over a plain float matrix. */
function naiveMatmul(w: Float32Array, rows: number, cols: number, x: Float32Array, batch: number): Float64Array {
  const out = new Float64Array(batch * rows);
  for (let b = 0; b < batch; b++) {
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let c = 0; c < cols; c++) sum += w[r * cols + c]! * x[b * cols + c]!;
      out[b * rows + r] = sum;
    }
  }
  return out;
}

test("matmul reads every ggml encoding in place and equals float64 products of the dequantized weights", () => {
  const rows = 6;
  const cols = 512;
  const batch = 3;
  const values = randomArray(1, rows * cols);
  const x = randomArray(2, batch * cols);
  for (const type of CODEC_TYPES) {
    const data = quantize(type, values);
    const w: WeightMatrix = { type, rows, cols, data };
    const out = new Float32Array(batch * rows);
    referenceMatmul(out, w, x, batch);
    const expected = naiveMatmul(dequantize(type, data, rows * cols), rows, cols, x, batch);
    assert.ok(maxRelativeError(out, expected) < 1e-6, `${typeName(type)}: ${maxRelativeError(out, expected)}`);
  }
});

test("matmul on F32 weights reads an aligned view of the bytes and equals the float64 product", () => {
  const rows = 7;
  const cols = 33; // no block constraint for floats
  const values = randomArray(3, rows * cols);
  const x = randomArray(4, 2 * cols);
  const w: WeightMatrix = { type: GgmlType.F32, rows, cols, data: new Uint8Array(values.buffer) };
  const out = new Float32Array(2 * rows);
  referenceMatmul(out, w, x, 2);
  assert.ok(maxRelativeError(out, naiveMatmul(values, rows, cols, x, 2)) < 1e-6);
});

test("rmsNorm equals x / sqrt(mean(x²) + eps) * w, and (1 + w) with the Gemma offset", () => {
  const dim = 48;
  const rows = 3;
  const x = randomArray(5, rows * dim, 3);
  const w = randomArray(6, dim);
  const eps = 1e-5;
  for (const offset of [0, 1]) {
    const out = new Float32Array(rows * dim);
    rmsNorm(out, x, w, rows, dim, eps, offset);
    const expected = new Float64Array(rows * dim);
    for (let r = 0; r < rows; r++) {
      const row = Array.from(x.subarray(r * dim, (r + 1) * dim));
      const rms = Math.sqrt(row.reduce((s, v) => s + v * v, 0) / dim + eps);
      row.forEach((v, i) => (expected[r * dim + i] = (v / rms) * (offset + w[i]!)));
    }
    assert.ok(maxRelativeError(out, expected) < 1e-6, `offset ${offset}`);
  }
});

test("RoPE normal mode rotates adjacent pairs as complex numbers by position · θ^(-2i/d)", () => {
  const heads = 3;
  const headDim = 8;
  const positions = Int32Array.of(0, 5, 17);
  const theta = 10000;
  const x = randomArray(7, positions.length * heads * headDim);
  const rotated = x.slice();
  applyRope(rotated, positions.length, heads, headDim, positions, ropeInverseFrequencies(headDim, theta, { type: "none" }), "normal");
  const expected = new Float64Array(x.length);
  for (let t = 0; t < positions.length; t++) {
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < headDim / 2; i++) {
        const angle = positions[t]! * Math.pow(theta, (-2 * i) / headDim);
        const at = (t * heads + h) * headDim + 2 * i;
        const [re, im] = [x[at]!, x[at + 1]!];
        expected[at] = re * Math.cos(angle) - im * Math.sin(angle);
        expected[at + 1] = re * Math.sin(angle) + im * Math.cos(angle);
      }
    }
  }
  assert.ok(maxRelativeError(rotated, expected) < 1e-6);
});

test("RoPE neox mode rotates (x[i], x[i + d/2]) as HF rotate_half does, and rotates only the first rotaryDim dims", () => {
  const headDim = 8;
  const rotaryDim = 4;
  const positions = Int32Array.of(3, 9);
  const x = randomArray(8, positions.length * headDim);
  const rotated = x.slice();
  applyRope(rotated, positions.length, 1, headDim, positions, ropeInverseFrequencies(rotaryDim, 500, { type: "none" }), "neox");
  const expected = Float64Array.from(x);
  for (let t = 0; t < positions.length; t++) {
    const base = t * headDim;
    // HF: q * cos + rotate_half(q) * sin with cos/sin repeated over both halves.
    for (let j = 0; j < rotaryDim; j++) {
      const i = j % (rotaryDim / 2);
      const angle = positions[t]! / Math.pow(500, (2 * i) / rotaryDim);
      const half = j < rotaryDim / 2 ? -x[base + j + rotaryDim / 2]! : x[base + j - rotaryDim / 2]!;
      expected[base + j] = x[base + j]! * Math.cos(angle) + half * Math.sin(angle);
    }
  }
  assert.ok(maxRelativeError(rotated, expected) < 1e-6);
});

test("GGUF's q/k row permutation turns neox RoPE into normal RoPE: normal(P·W·x) = P·neox(W·x)", () => {
  const heads = 2;
  const headDim = 8;
  const cols = 16;
  const w = randomArray(9, heads * headDim * cols);
  const x = randomArray(10, cols);
  const positions = Int32Array.of(11);
  const frequencies = ropeInverseFrequencies(headDim, 10000, { type: "none" });
  const hf = new Float32Array(heads * headDim);
  referenceMatmul(hf, { type: GgmlType.F32, rows: heads * headDim, cols, data: new Uint8Array(w.buffer) }, x, 1);
  applyRope(hf, 1, heads, headDim, positions, frequencies, "neox");
  const permuted = permuteForNormalRope(w, heads, headDim);
  const gguf = new Float32Array(heads * headDim);
  referenceMatmul(gguf, { type: GgmlType.F32, rows: heads * headDim, cols, data: new Uint8Array(permuted.buffer) }, x, 1);
  applyRope(gguf, 1, heads, headDim, positions, frequencies, "normal");
  // Permute the HF result the same way (a vector is a matrix with one column).
  assert.ok(maxRelativeError(gguf, permuteForNormalRope(hf, heads, headDim)) < 1e-6);
});

test("llama3 RoPE scaling follows transformers' _compute_llama3_parameters, and GGUF freq factors reproduce it", () => {
  const dim = 64;
  const theta = 500000;
  const [factor, low, high, original] = [8, 1, 4, 8192];
  const scaled = ropeInverseFrequencies(dim, theta, {
    type: "llama3",
    factor,
    lowFreqFactor: low,
    highFreqFactor: high,
    originalContextLength: original,
  });
  const lowWavelength = original / low;
  const highWavelength = original / high;
  for (let i = 0; i < dim / 2; i++) {
    const inv = 1 / Math.pow(theta, (2 * i) / dim);
    const wavelength = (2 * Math.PI) / inv;
    const llama = wavelength > lowWavelength ? inv / factor : inv;
    const smooth = (original / wavelength - low) / (high - low);
    const smoothed = ((1 - smooth) * llama) / factor + smooth * llama;
    const medium = !(wavelength < highWavelength) && !(wavelength > lowWavelength);
    const expected = medium ? smoothed : llama;
    assert.ok(Math.abs(scaled[i]! - expected) <= 1e-12 * expected, `pair ${i}`);
  }
  const plain = ropeInverseFrequencies(dim, theta, { type: "none" });
  const factors = Float32Array.from(plain, (f, i) => f / scaled[i]!);
  const fromFactors = ropeInverseFrequencies(dim, theta, { type: "none" }, factors);
  assert.ok(maxRelativeError(fromFactors.map((f) => f * 1e6), scaled.map((f) => f * 1e6)) < 1e-6);
  const linear = ropeInverseFrequencies(dim, theta, { type: "linear", factor: 4 });
  linear.forEach((f, i) => assert.ok(Math.abs(f - plain[i]! / 4) <= 1e-15));
});

test("softmax, SiLU, GELU-tanh and the gated activation match their formulas", () => {
  const x = randomArray(11, 20, 6);
  const s = x.slice();
  softmax(s);
  const total = Array.from(x).reduce((a, v) => a + Math.exp(v), 0);
  assert.ok(maxRelativeError(s, Array.from(x, (v) => Math.exp(v) / total)) < 1e-6);
  for (const v of [-8, -1.5, -0.1, 0, 0.3, 2, 9]) {
    assert.ok(Math.abs(silu(v) - v * (1 / (1 + Math.exp(-v)))) < 1e-15);
    const tanhGelu = 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    assert.ok(Math.abs(geluTanh(v) - tanhGelu) < 1e-15);
  }
  // GELU-tanh stays within 1e-3 of the exact erf GELU (Abramowitz-Stegun erf, error < 1.5e-7).
  const erf = (z: number) => {
    const t = 1 / (1 + 0.3275911 * Math.abs(z));
    const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-z * z);
    return z >= 0 ? y : -y;
  };
  for (let v = -5; v <= 5; v += 0.25) assert.ok(Math.abs(geluTanh(v) - 0.5 * v * (1 + erf(v / Math.SQRT2))) < 1e-3);
  const gate = randomArray(12, 10, 3);
  const up = randomArray(13, 10, 3);
  const out = new Float32Array(10);
  gatedActivation(out, gate, up, 10, "gelu_tanh");
  assert.ok(maxRelativeError(out, Array.from(gate, (g, i) => geluTanh(g) * up[i]!)) < 1e-6);
});

test("embedding lookup dequantizes the requested rows of a quantized matrix and scales them", () => {
  const vocab = 10;
  const dim = 64;
  const values = randomArray(14, vocab * dim);
  const data = quantize(GgmlType.Q8_0, values);
  const full = dequantize(GgmlType.Q8_0, data, vocab * dim);
  const tokens = Int32Array.of(3, 0, 9, 3);
  const out = new Float32Array(tokens.length * dim);
  embeddingLookup(out, { type: GgmlType.Q8_0, rows: vocab, cols: dim, data }, tokens, 2.5);
  const expected = Array.from(tokens).flatMap((t) => Array.from(full.subarray(t * dim, (t + 1) * dim), (v) => v * 2.5));
  assert.ok(maxRelativeError(out, expected) < 1e-6);
});

test("attention: GQA heads, causal masks per sequence, sliding windows, soft-capping, against a masked dense softmax", () => {
  const numHeads = 4;
  const numKVHeads = 2;
  const headDim = 8;
  const slotLength = 12;
  const slots = 2;
  const kvDim = numKVHeads * headDim;
  // Cached keys/values per (slot, position), written into the cache layout below.
  const keys = randomArray(15, slots * slotLength * kvDim);
  const values = randomArray(16, slots * slotLength * kvDim);
  // Two sequences interleaved: slot 1 at positions 4..6, slot 0 at positions 8..9.
  const seqIds = Int32Array.of(1, 0, 1, 0, 1);
  const positions = Int32Array.of(4, 8, 5, 9, 6);
  const tokens = positions.length;
  const q = randomArray(17, tokens * numHeads * headDim, 2);
  for (const [window, softcap] of [
    [0, 0],
    [3, 0],
    [0, 1.5],
  ] as const) {
    const out = new Float32Array(tokens * numHeads * headDim);
    const scale = 1 / Math.sqrt(headDim);
    referenceAttention(out, q, keys, values, {
      tokens,
      numHeads,
      numKVHeads,
      headDim,
      positions,
      seqIds,
      slotLength,
      scale,
      window,
      softcap,
    });
    // Dense: score every (query, cached entry) pair, mask by slot, causality and window.
    const expected = new Float64Array(out.length);
    for (let t = 0; t < tokens; t++) {
      for (let h = 0; h < numHeads; h++) {
        const kvHead = h >> 1; // 4 query heads share 2 KV heads
        const weights: number[] = [];
        const entries: number[] = [];
        for (let slot = 0; slot < slots; slot++) {
          for (let p = 0; p < slotLength; p++) {
            const visible = slot === seqIds[t] && p <= positions[t]! && (window === 0 || positions[t]! - p < window);
            if (!visible) continue;
            const at = (slot * slotLength + p) * kvDim + kvHead * headDim;
            let score = 0;
            for (let d = 0; d < headDim; d++) score += q[(t * numHeads + h) * headDim + d]! * keys[at + d]!;
            score *= scale;
            if (softcap) score = softcap * Math.tanh(score / softcap);
            weights.push(score);
            entries.push(at);
          }
        }
        const max = Math.max(...weights);
        const exps = weights.map((s) => Math.exp(s - max));
        const total = exps.reduce((a, b) => a + b, 0);
        for (let d = 0; d < headDim; d++) {
          expected[(t * numHeads + h) * headDim + d] = exps.reduce((a, e, j) => a + (e / total) * values[entries[j]! + d]!, 0);
        }
      }
    }
    assert.ok(maxRelativeError(out, expected) < 1e-6, `window ${window}, softcap ${softcap}`);
  }
});
