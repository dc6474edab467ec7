/**
 * The training ops' fast paths (WebAssembly SIMD kernels on the worker pool)
 * against their TypeScript references at 1 to 4 threads, on shapes that leave
 * partial SIMD vectors and uneven thread shares.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { denseBackward, denseForward, frozenLinearBackward } from "../../src/train/ops/linear.js";
import { GgmlType } from "@infer/formats";
import { gatedBackward, gatedForward } from "../../src/train/ops/gated-activation.js";
import { crossEntropy } from "../../src/train/ops/cross-entropy.js";
import { vocabularyBackward, vocabularyForward } from "../../src/train/ops/vocabulary-projection.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import type { Kernels } from "../../src/kernels/types.js";
import { attentionBackward, attentionForward, referenceAttentionBackward, referenceAttentionForward, type AttentionShape } from "../../src/train/ops/attention.js";
import { random } from "../kernels/helpers.js";
import { kernelPools, POOL_THREADS, randomValues, relativeError } from "./gradcheck.js";

const pools = kernelPools();

function assertClose(name: string, got: ArrayLike<number>, expected: ArrayLike<number>, bound: number): void {
  const error = relativeError(got, expected);
  assert.ok(error < bound, `${name}: relative error ${error.toExponential(2)} >= ${bound}`);
}

/** Token t's sequence start, for consecutive sequences of these lengths. */
function packed(lengths: number[]): Int32Array {
  const starts: number[] = [];
  let start = 0;
  for (const length of lengths) {
    for (let i = 0; i < length; i++) starts.push(start);
    start += length;
  }
  return Int32Array.from(starts);
}

describe("training attention on the WebAssembly kernels equals the TypeScript reference", () => {
  const cases: { name: string; shape: AttentionShape }[] = [
    { name: "three sequences, grouped heads of 12", shape: { tokens: 112, numHeads: 6, numKVHeads: 2, headDim: 12, sequenceStart: packed([37, 5, 70]), scale: 0.29, window: 0 } },
    { name: "one sequence, a window of 9, heads of 16", shape: { tokens: 41, numHeads: 4, numKVHeads: 4, headDim: 16, sequenceStart: packed([41]), scale: 0.25, window: 9 } },
    { name: "single-token sequences, one KV head of 64", shape: { tokens: 3, numHeads: 3, numKVHeads: 1, headDim: 64, sequenceStart: packed([1, 1, 1]), scale: 0.125, window: 0 } },
  ];
  for (const { name, shape } of cases) {
    it(`${name}: forward output and dq, dk, dv at 1 to 4 threads`, () => {
      const next = random(7 + shape.tokens);
      const width = shape.numHeads * shape.headDim;
      const kvWidth = shape.numKVHeads * shape.headDim;
      const f32 = (count: number, scale = 1) => randomValues(count, next, scale, false) as Float32Array;
      const q = f32(shape.tokens * width, 2);
      const k = f32(shape.tokens * kvWidth, 2);
      const v = f32(shape.tokens * kvWidth);
      const dOut = f32(shape.tokens * width);
      // Gradients are added to what the buffers hold.
      const dq0 = f32(q.length);
      const dk0 = f32(k.length);
      const dv0 = f32(v.length);
      const expectedOut = new Float32Array(q.length);
      const saved = referenceAttentionForward(expectedOut, q, k, v, shape);
      const [dq, dk, dv] = [dq0.slice(), dk0.slice(), dv0.slice()];
      referenceAttentionBackward(dq, dk, dv, dOut, q, k, v, saved, shape);
      pools.forEach((kernels, i) => {
        const label = `${name}, ${POOL_THREADS[i]} threads`;
        const out = new Float32Array(q.length);
        const fast = attentionForward(out, q, k, v, shape, kernels);
        assert.ok("logSumExp" in fast, `${label}: the kernels ran the forward`);
        assertClose(`${label}: out`, out, expectedOut, 1e-6);
        const grads = [dq0.slice(), dk0.slice(), dv0.slice()] as const;
        attentionBackward(...grads, dOut, q, k, v, fast, shape, kernels);
        assertClose(`${label}: dq`, grads[0], dq, 1e-6);
        assertClose(`${label}: dk`, grads[1], dk, 1e-6);
        assertClose(`${label}: dv`, grads[2], dv, 1e-6);
      });
    });
  }

  it("heads whose size is not a multiple of 4, and float64 buffers, run the reference", () => {
    const shape: AttentionShape = { tokens: 4, numHeads: 2, numKVHeads: 1, headDim: 3, sequenceStart: packed([4]), scale: 0.5, window: 0 };
    const next = random(3);
    const q = randomValues(24, next, 1, false) as Float32Array;
    const k = randomValues(12, next, 1, false) as Float32Array;
    assert.ok("weights" in attentionForward(new Float32Array(24), q, k, k, shape, pools[1]));
    const wide = { ...shape, headDim: 4 };
    const q64 = randomValues(32, next) as unknown as Float32Array;
    const k64 = randomValues(16, next) as unknown as Float32Array;
    assert.ok("weights" in attentionForward(new Float64Array(32) as unknown as Float32Array, q64, k64, k64, wide, pools[1]));
  });
});

describe("the kernels' gemm equals a float64 product, with the same bits on 1 to 4 threads", () => {
  // Rows of c past the tiles of 4, columns past the panels of 8 and the tiles of 64, a depth of several
  // blocks (and one step): each operand stored either way, accumulating or not.
  for (const [m, n, k] of [[37, 75, 600], [5, 8, 1], [64, 13, 257]] as const) {
    it(`[${m}, ${k}] x [${k}, ${n}], a and b stored either way, c = or +=`, () => {
      const next = random(m * 31 + n * 7 + k);
      const f32 = (count: number) => randomValues(count, next, 1, false) as Float32Array;
      const a = f32(m * k);
      const b = f32(k * n);
      const c0 = f32(m * n);
      const transpose = (values: Float32Array, rows: number, cols: number) => Float32Array.from({ length: rows * cols }, (_, i) => values[(i % rows) * cols + Math.floor(i / rows)]!);
      for (const transposeA of [false, true]) {
        for (const transposeB of [false, true]) {
          for (const accumulate of [false, true]) {
            const expected = new Float64Array(m * n);
            for (let i = 0; i < m; i++) {
              for (let j = 0; j < n; j++) {
                let sum = accumulate ? c0[i * n + j]! : 0;
                for (let kk = 0; kk < k; kk++) sum += a[i * k + kk]! * b[kk * n + j]!;
                expected[i * n + j] = sum;
              }
            }
            const shape = { m, n, k, transposeA, transposeB, accumulate };
            const label = `transposeA ${transposeA}, transposeB ${transposeB}, accumulate ${accumulate}`;
            const results = pools.map((kernels) => {
              const c = accumulate ? c0.slice() : new Float32Array(m * n).fill(NaN);
              kernels.gemm!(c, transposeA ? transpose(a, m, k) : a, transposeB ? transpose(b, k, n) : b, shape);
              return c;
            });
            assertClose(label, results[0]!, expected, 1e-5);
            results.forEach((c, i) => assert.deepEqual(c, results[0], `${label}: ${POOL_THREADS[i]} threads vs 1`));
          }
        }
      }
    });
  }
});

describe("LoRA's dense matmuls on the WebAssembly kernels equal the TypeScript reference", () => {
  // LoRA's shapes (rank rows of A, rank columns of B), and odd sizes that leave partial tiles.
  for (const [rows, cols, n] of [[8, 96, 37], [96, 8, 37], [5, 13, 3]] as const) {
    it(`[${rows}, ${cols}] over ${n} rows: forward, weight and input gradients at 1 to 4 threads`, () => {
      const next = random(rows * 1000 + cols);
      const f32 = (count: number) => randomValues(count, next, 1, false) as Float32Array;
      const w = f32(rows * cols);
      const x = f32(n * cols);
      const dy = f32(n * rows);
      const dw0 = f32(w.length);
      const dx0 = f32(x.length);
      const expectedOut = new Float32Array(n * rows);
      denseForward(expectedOut, w, rows, cols, x, n);
      const [dw, dx] = [dw0.slice(), dx0.slice()];
      denseBackward(dw, dx, w, rows, cols, x, dy, n);
      pools.forEach((kernels, i) => {
        const label = `${POOL_THREADS[i]} threads`;
        const out = new Float32Array(n * rows).fill(NaN);
        denseForward(out, w, rows, cols, x, n, kernels);
        assertClose(`${label}: out`, out, expectedOut, 1e-6);
        const [gotW, gotX] = [dw0.slice(), dx0.slice()];
        denseBackward(gotW, gotX, w, rows, cols, x, dy, n, kernels);
        assertClose(`${label}: dw`, gotW, dw, 1e-6);
        assertClose(`${label}: dx`, gotX, dx, 1e-6);
        // The same array changed in place is read afresh (the optimizer updates the adapters so).
        const saved = w.slice();
        for (let j = 0; j < w.length; j++) w[j] = -2 * w[j]!;
        denseForward(out, w, rows, cols, x, n, kernels);
        w.set(saved);
        assertClose(`${label}: out after w changed`, out, expectedOut.map((value) => -2 * value), 1e-6);
      });
    });
  }
});

describe("the gated MLP's forward and backward on the WebAssembly kernels equal the TypeScript reference", () => {
  for (const activation of ["silu", "gelu_tanh"] as const) {
    it(`${activation}, a partial last vector, large gates of both signs`, () => {
      const next = random(activation.length);
      const count = 4099;
      const f32 = (scale: number) => randomValues(count, next, scale, false) as Float32Array;
      const gate = f32(12);
      const up = f32(1);
      const dOut = f32(1);
      const dGate0 = f32(1);
      const dUp0 = f32(1);
      const [dGate, dUp] = [dGate0.slice(), dUp0.slice()];
      gatedBackward(dGate, dUp, dOut, gate, up, count, activation);
      const mixed = new Float32Array(count);
      gatedForward(mixed, gate, up, count, activation);
      for (const kernels of pools) {
        const got = new Float32Array(count).fill(NaN);
        gatedForward(got, gate, up, count, activation, kernels);
        assertClose(`${activation} forward`, got, mixed, 1e-6);
        const [gotGate, gotUp] = [dGate0.slice(), dUp0.slice()];
        gatedBackward(gotGate, gotUp, dOut, gate, up, count, activation, kernels);
        assertClose(`${activation} dGate`, gotGate, dGate, 1e-6);
        assertClose(`${activation} dUp`, gotUp, dUp, 1e-6);
      }
    });
  }
});

describe("cross-entropy over the vocabulary on the WebAssembly kernels equals the TypeScript reference", () => {
  // A vocabulary with a partial last vector, logits wide enough that exp flushes some, rows without a target,
  // and more rows than threads or fewer.
  for (const [rows, vocab] of [[11, 1031], [2, 4096], [5, 7]] as const) {
    it(`[${rows}, ${vocab}]: the summed loss and the gradient over the logits at 1 to 4 threads, staged or in the kernels' memory`, () => {
      const next = random(rows * 31 + vocab);
      const logits = Float32Array.from(randomValues(rows * vocab, next), (v) => 40 * v);
      const targets = Int32Array.from({ length: rows }, (_, r) => (r % 4 === 1 ? -1 : (r * 7919) % vocab));
      const expectedGradient = logits.slice();
      const expected = crossEntropy(expectedGradient, targets, rows, vocab, expectedGradient, 0.25, 1.5);
      pools.forEach((kernels, i) => {
        const label = `${POOL_THREADS[i]} threads`;
        assert.ok(Math.abs(crossEntropy(logits.slice(), targets, rows, vocab, undefined, 0.25, 1.5, kernels) - expected) < 1e-6 * Math.abs(expected), `${label}: loss alone`);
        const staged = logits.slice();
        const loss = crossEntropy(staged, targets, rows, vocab, staged, 0.25, 1.5, kernels);
        assert.ok(Math.abs(loss - expected) < 1e-6 * Math.abs(expected), `${label}: loss ${loss} against ${expected}`);
        assertClose(`${label}: gradient`, staged, expectedGradient, 1e-5);
        const view = kernels.allocate!(logits.length * 4);
        const resident = new Float32Array(view.buffer, view.byteOffset, logits.length);
        resident.set(logits);
        crossEntropy(resident, targets, rows, vocab, resident, 0.25, 1.5, kernels);
        assertClose(`${label}: gradient in place`, resident, expectedGradient, 1e-5);
        kernels.release!(view);
      });
    });
  }

  it("a NaN logit makes the loss NaN, as the reference's does", () => {
    const logits = new Float32Array(64).fill(1);
    logits[37] = NaN;
    for (const kernels of pools) assert.ok(Number.isNaN(crossEntropy(logits.slice(), Int32Array.of(0), 1, 64, undefined, 1, 0, kernels)));
  });
});

describe("a frozen float base's input gradient on the WebAssembly kernels equals the TypeScript reference", () => {
  // An F16 view at an odd offset: the transposed copy reads its halves through an aligned copy.
  // [131, 70]: more than one tile of the kernels' transpose each way, partial ones at both ends.
  for (const [type, offset, rows, cols] of [[GgmlType.F32, 0, 13, 40], [GgmlType.F16, 0, 13, 40], [GgmlType.F16, 1, 13, 40], [GgmlType.F32, 0, 131, 70], [GgmlType.F16, 0, 131, 70]] as const) {
    it(`${GgmlType[type]} [${rows}, ${cols}] base starting ${offset} bytes into its buffer, 1 to 4 threads`, () => {
      const next = random(50 + type + offset + rows);
      const n = 9;
      // Multiples of 1/8 below 16 in magnitude: exact in both encodings.
      const values = Float32Array.from(randomValues(rows * cols, next), (v) => Math.round(v * 16) / 8);
      const bytes = type === GgmlType.F32 ? new Uint8Array(values.buffer) : new Uint8Array(Uint16Array.from(values, halfBits).buffer);
      const shifted = new Uint8Array(bytes.length + offset);
      shifted.set(bytes, offset);
      const w = { type, rows, cols, data: shifted.subarray(offset) };
      const dy = randomValues(n * rows, next, 1, false) as Float32Array;
      const dx0 = randomValues(n * cols, next, 1, false) as Float32Array;
      const expected = dx0.slice();
      frozenLinearBackward(expected, w, dy, n);
      for (const kernels of pools) {
        const got = dx0.slice();
        frozenLinearBackward(got, w, dy, n, kernels);
        assertClose(`${GgmlType[type]} dx`, got, expected, 1e-6);
      }
    });
  }
});

describe("the LM head's vocabulary projection on the kernels' gemm equals the TypeScript reference", () => {
  // A vocabulary past gemm's tiles of 128 columns with a partial panel of 8, rows past the tiles of 4;
  // the head in the kernels' memory (as loaded) and outside it (staged).
  for (const [vocab, hidden, n] of [[1031, 40, 9], [77, 70, 4]] as const) {
    it(`[${vocab}, ${hidden}] head over ${n} rows: logits and the input gradient at 1 to 4 threads`, () => {
      const next = random(vocab + hidden + n);
      const values = randomValues(vocab * hidden, next, 1, false) as Float32Array;
      const x = randomValues(n * hidden, next, 1, false) as Float32Array;
      const dLogits = randomValues(n * vocab, next, 1, false) as Float32Array;
      const dx0 = randomValues(n * hidden, next, 1, false) as Float32Array;
      const plain = { type: GgmlType.F32, rows: vocab, cols: hidden, data: new Uint8Array(values.buffer) };
      const expectedLogits = new Float32Array(n * vocab);
      vocabularyForward(referenceKernels, expectedLogits, plain, x, n);
      const expectedDx = dx0.slice();
      vocabularyBackward(referenceKernels, expectedDx, plain, dLogits, n);
      pools.forEach((kernels, i) => {
        const resident = kernels.allocate!(values.byteLength);
        resident.set(plain.data);
        for (const w of [plain, { ...plain, data: resident }]) {
          const label = `${POOL_THREADS[i]} threads, ${w === plain ? "staged" : "in the kernels' memory"}`;
          let gemms = 0;
          const counted: Kernels = Object.assign(Object.create(kernels) as Kernels, { gemm: (...args: Parameters<NonNullable<Kernels["gemm"]>>) => (gemms++, kernels.gemm!(...args)) });
          const logits = new Float32Array(n * vocab).fill(NaN);
          vocabularyForward(counted, logits, w, x, n);
          assertClose(`${label}: logits`, logits, expectedLogits, 1e-6);
          const dx = dx0.slice();
          vocabularyBackward(counted, dx, w, dLogits, n);
          assertClose(`${label}: dx`, dx, expectedDx, 1e-6);
          assert.equal(gemms, 2, `${label}: both ran on gemm`);
        }
        kernels.release!(resident);
      });
    });
  }
});

/** The f16 bits of v, a multiple of 1/8 below 16 in magnitude (so exact). */
function halfBits(v: number): number {
  if (v === 0) return 0;
  const sign = v < 0 ? 0x8000 : 0;
  const a = Math.abs(v);
  const exponent = Math.floor(Math.log2(a));
  const mantissa = Math.round((a / 2 ** exponent - 1) * 1024);
  return sign | ((exponent + 15) << 10) | mantissa;
}
