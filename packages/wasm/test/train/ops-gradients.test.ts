/**
 * Every training op's backward against finite differences of its forward,
 * run in float64 (the ops index any typed array): relative error < 1e-3.
 */
import { describe, it } from "node:test";
import { GgmlType, quantize } from "@infer/formats";
import { Rng } from "@infer/core";
import { applyRope } from "../../src/kernels/ops.js";
import { embeddingLookup } from "../../src/kernels/dequant.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import type { WeightMatrix } from "../../src/kernels/types.js";
import { attentionBackward, attentionForward, type AttentionShape } from "../../src/train/ops/attention.js";
import { crossEntropy } from "../../src/train/ops/cross-entropy.js";
import { embeddingBackward } from "../../src/train/ops/embedding.js";
import { gatedBackward, gatedForward } from "../../src/train/ops/gated-activation.js";
import { denseBackward, denseForward, frozenLinearBackward, frozenLinearForward } from "../../src/train/ops/linear.js";
import { rmsNormBackward, rmsNormForward } from "../../src/train/ops/rms-norm.js";
import { ropeBackward } from "../../src/train/ops/rope.js";
import { assertGradient, dot, finiteDifferences, randomValues } from "./gradcheck.js";

const F = (x: Float64Array | Float32Array) => x as Float32Array; // the ops run on float64 buffers here
function source(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.nextFloat();
}

describe("training ops: backward against finite differences", () => {
  for (const unitOffset of [0, 1]) {
    it(`RMSNorm (unit offset ${unitOffset})`, () => {
      const next = source(1 + unitOffset);
      const rows = 3;
      const dim = 16;
      const x = randomValues(rows * dim, next, 2);
      const w = Float32Array.from(randomValues(dim, next, 1));
      const r = randomValues(rows * dim, next);
      const forward = () => {
        const out = new Float64Array(rows * dim);
        const inverse = rmsNormForward(F(out), F(x), w, rows, dim, 1e-5, unitOffset);
        return { out, inverse };
      };
      const dx = new Float64Array(rows * dim);
      rmsNormBackward(F(dx), F(r), F(x), w, forward().inverse, rows, dim, unitOffset);
      assertGradient("rmsNorm dx", dx, finiteDifferences(x, () => dot(forward().out, r)));
    });
  }

  for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_K, GgmlType.Q6_K]) {
    it(`frozen linear over ${GgmlType[type]} weights (with bias)`, () => {
      const next = source(10 + type);
      const rows = 8;
      const cols = 256; // one K-quant super-block
      const n = 3;
      const w: WeightMatrix = { type, rows, cols, data: quantize(type, Float32Array.from(randomValues(rows * cols, next, 0.5))) };
      const bias = Float32Array.from(randomValues(rows, next));
      const x = randomValues(n * cols, next);
      const r = randomValues(n * rows, next);
      const loss = () => {
        const out = new Float64Array(n * rows);
        frozenLinearForward(referenceKernels, F(out), w, F(x), n, bias);
        return dot(out, r);
      };
      const dx = new Float64Array(n * cols);
      frozenLinearBackward(F(dx), w, F(r), n);
      const numeric = finiteDifferences(x, loss, 1e-4);
      assertGradient("linear dx", dx, numeric);
      // Float bases run the backward as the kernels' matmul over a transposed copy.
      const viaKernels = new Float64Array(n * cols);
      frozenLinearBackward(F(viaKernels), w, F(r), n, referenceKernels);
      assertGradient("linear dx through the kernels", viaKernels, numeric);
    });
  }

  it("dense linear (LoRA's A and B): weight and input gradients", () => {
    const next = source(20);
    const rows = 5;
    const cols = 7;
    const n = 4;
    const w = randomValues(rows * cols, next);
    const x = randomValues(n * cols, next);
    const r = randomValues(n * rows, next);
    const loss = () => {
      const out = new Float64Array(n * rows);
      denseForward(F(out), F(w), rows, cols, F(x), n);
      return dot(out, r);
    };
    const dw = new Float64Array(rows * cols);
    const dx = new Float64Array(n * cols);
    denseBackward(F(dw), F(dx), F(w), rows, cols, F(x), F(r), n);
    assertGradient("dense dW", dw, finiteDifferences(w, loss));
    assertGradient("dense dx", dx, finiteDifferences(x, loss));
  });

  for (const mode of ["normal", "neox"] as const) {
    it(`RoPE (${mode}, partial rotary, magnitude)`, () => {
      const next = source(30);
      const tokens = 4;
      const heads = 2;
      const headDim = 8;
      const inverse = Float64Array.from([1, 0.3, 0.05]); // rotates 6 of 8 dims
      const positions = Int32Array.from([0, 1, 2, 7]);
      const x = randomValues(tokens * heads * headDim, next);
      const r = randomValues(x.length, next);
      const loss = () => {
        const out = Float64Array.from(x);
        applyRope(F(out), tokens, heads, headDim, positions, inverse, mode, 1.3);
        return dot(out, r);
      };
      const dx = Float64Array.from(r);
      ropeBackward(F(dx), tokens, heads, headDim, positions, inverse, mode, 1.3);
      assertGradient("rope dx", dx, finiteDifferences(x, loss));
    });
  }

  for (const window of [0, 2]) {
    it(`causal attention, grouped KV heads, two packed sequences (window ${window})`, () => {
      const next = source(40 + window);
      const shape: AttentionShape = {
        tokens: 5,
        numHeads: 4,
        numKVHeads: 2,
        headDim: 3,
        sequenceStart: Int32Array.from([0, 0, 0, 3, 3]),
        scale: 0.7,
        window,
      };
      const q = randomValues(shape.tokens * 4 * 3, next);
      const k = randomValues(shape.tokens * 2 * 3, next);
      const v = randomValues(shape.tokens * 2 * 3, next);
      const r = randomValues(q.length, next);
      const run = () => {
        const out = new Float64Array(q.length);
        const saved = attentionForward(F(out), F(q), F(k), F(v), shape);
        return { out, saved };
      };
      const dq = new Float64Array(q.length);
      const dk = new Float64Array(k.length);
      const dv = new Float64Array(v.length);
      attentionBackward(F(dq), F(dk), F(dv), F(r), F(q), F(k), F(v), run().saved, shape);
      const loss = () => dot(run().out, r);
      assertGradient("attention dq", dq, finiteDifferences(q, loss));
      assertGradient("attention dk", dk, finiteDifferences(k, loss));
      assertGradient("attention dv", dv, finiteDifferences(v, loss));
    });
  }

  for (const activation of ["silu", "gelu_tanh"] as const) {
    it(`gated activation (${activation})`, () => {
      const next = source(50);
      const count = 12;
      const gate = randomValues(count, next, 3);
      const up = randomValues(count, next, 2);
      const r = randomValues(count, next);
      const loss = () => {
        const out = new Float64Array(count);
        gatedForward(F(out), F(gate), F(up), count, activation);
        return dot(out, r);
      };
      const dGate = new Float64Array(count);
      const dUp = new Float64Array(count);
      gatedBackward(F(dGate), F(dUp), F(r), F(gate), F(up), count, activation);
      assertGradient("dGate", dGate, finiteDifferences(gate, loss));
      assertGradient("dUp", dUp, finiteDifferences(up, loss));
    });
  }

  it("cross-entropy over the vocabulary (a row without target included)", () => {
    const next = source(60);
    const rows = 3;
    const vocab = 11;
    const logits = randomValues(rows * vocab, next, 3);
    const targets = Int32Array.from([4, -1, 10]);
    const dLogits = new Float64Array(logits.length);
    crossEntropy(F(logits), targets, rows, vocab, F(dLogits), 0.5);
    const numeric = finiteDifferences(logits, () => 0.5 * crossEntropy(F(logits), targets, rows, vocab));
    assertGradient("dLogits", dLogits, numeric);
  });

  it("embedding lookup (scaled, a repeated token)", () => {
    const next = source(70);
    const vocab = 6;
    const hidden = 4;
    const table = Float32Array.from(randomValues(vocab * hidden, next));
    const w: WeightMatrix = { type: GgmlType.F32, rows: vocab, cols: hidden, data: new Uint8Array(table.buffer) };
    const tokens = Int32Array.from([2, 5, 2]);
    const r = randomValues(tokens.length * hidden, next);
    const loss = () => {
      const out = new Float64Array(tokens.length * hidden);
      embeddingLookup(F(out), w, tokens, 1.5);
      return dot(out, r);
    };
    const dTable = new Float64Array(table.length);
    embeddingBackward(F(dTable), F(r), tokens, hidden, 1.5);
    assertGradient("dEmbedding", dTable, finiteDifferences(table, loss, 1e-3));
  });
});
