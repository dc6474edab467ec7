// The WebAssembly RMSNorm, RoPE and adds (assembly/elementwise.ts) against
// ops.ts's: the same bits, on buffers in the kernels' memory (run in
// WebAssembly) and outside it (handed to ops.ts), at odd sizes, both RoPE
// layouts, partial rotary dims and the Gemma norm offset; and their bad input.
// These run on the calling thread alone (no worker-pool job), so one thread covers them.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { argmax } from "@infer/core";
import { addBias, addInPlace, applyRope, rmsNorm, type RopeMode } from "../../src/kernels/ops.js";
import type { Kernels } from "../../src/kernels/types.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, random, randomActivations } from "./helpers.js";

type WasmKernels = Required<Pick<Kernels, "rmsNorm" | "rope" | "addInPlace" | "addBias" | "argmax" | "allocate">> & Kernels;

describe("wasm elementwise kernels", () => {
  let kernels: WasmKernels;
  before(async () => {
    kernels = (await createWasmKernels({ threads: 1 })) as WasmKernels;
  });
  after(async () => {
    await kernels.dispose?.();
  });

  /** `values` copied into the kernels' memory. */
  function inKernelMemory(values: Float32Array): Float32Array {
    const view = kernels.allocate(values.byteLength);
    const floats = new Float32Array(view.buffer, view.byteOffset, values.length);
    floats.set(values);
    return floats;
  }

  function assertSameBits(actual: Float32Array, expected: Float32Array, what: string): void {
    assert.equal(actual.length, expected.length, what);
    const a = new Uint32Array(actual.buffer, actual.byteOffset, actual.length);
    const e = new Uint32Array(expected.buffer, expected.byteOffset, expected.length);
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== e[i]) assert.fail(`${what}: element ${i} is ${actual[i]}, ops.ts gives ${expected[i]}`);
    }
  }

  it("rmsNorm gives ops.ts's bits, in place or not, in the kernels' memory or not", () => {
    const next = random(11);
    for (const dim of [1, 3, 4, 7, 33, 64, 576]) {
      for (const unitOffset of [0, 1]) {
        const rows = 5;
        const x = randomActivations(rows * dim, next);
        const weight = randomActivations(dim, next);
        const expected = new Float32Array(rows * dim);
        rmsNorm(expected, x, weight, rows, dim, 1e-6, unitOffset);
        const out = inKernelMemory(new Float32Array(rows * dim));
        kernels.rmsNorm(out, inKernelMemory(x), weight, rows, dim, 1e-6, unitOffset);
        assertSameBits(out, expected, `dim ${dim}, offset ${unitOffset}`);
        const inPlace = inKernelMemory(x);
        kernels.rmsNorm(inPlace, inPlace, weight, rows, dim, 1e-6, unitOffset);
        assertSameBits(inPlace, expected, `in place, dim ${dim}`);
        const outside = new Float32Array(rows * dim);
        kernels.rmsNorm(outside, x, weight, rows, dim, 1e-6, unitOffset);
        assertSameBits(outside, expected, `outside the kernels' memory, dim ${dim}`);
      }
    }
  });

  it("rope gives ops.ts's bits for both layouts, partial rotary dims and a magnitude", () => {
    const next = random(12);
    const cases: { heads: number; headDim: number; pairs: number; mode: RopeMode; magnitude: number }[] = [
      { heads: 3, headDim: 8, pairs: 4, mode: "normal", magnitude: 1 },
      { heads: 3, headDim: 64, pairs: 32, mode: "neox", magnitude: 1 },
      { heads: 2, headDim: 12, pairs: 3, mode: "neox", magnitude: 1.2 },
      { heads: 5, headDim: 10, pairs: 5, mode: "normal", magnitude: 0.9 },
    ];
    for (const { heads, headDim, pairs, mode, magnitude } of cases) {
      const tokens = 6;
      const positions = Int32Array.from({ length: tokens }, (_, t) => 3 + 7 * t);
      const inverseFrequencies = Float64Array.from({ length: pairs }, (_, i) => Math.pow(10000, (-2 * i) / (2 * pairs)) * (1 + next() * 0.01));
      const x = randomActivations(tokens * heads * headDim, next);
      const expected = x.slice();
      applyRope(expected, tokens, heads, headDim, positions, inverseFrequencies, mode, magnitude);
      const rotated = inKernelMemory(x);
      kernels.rope(rotated, tokens, heads, headDim, positions, inverseFrequencies, mode, magnitude);
      assertSameBits(rotated, expected, `${mode}, ${heads} x ${headDim}, ${pairs} pairs`);
      // A second call at other positions must not reuse the first call's rotation table.
      const later = Int32Array.from(positions, (p) => p + 1);
      const expectedLater = x.slice();
      applyRope(expectedLater, tokens, heads, headDim, later, inverseFrequencies, mode, magnitude);
      const rotatedLater = inKernelMemory(x);
      kernels.rope(rotatedLater, tokens, heads, headDim, later, inverseFrequencies, mode, magnitude);
      assertSameBits(rotatedLater, expectedLater, `${mode}, positions moved by one`);
    }
  });

  it("addInPlace and addBias give ops.ts's bits", () => {
    const next = random(13);
    for (const dim of [1, 5, 8, 577]) {
      const rows = 3;
      const x = randomActivations(rows * dim, next);
      const y = randomActivations(rows * dim, next);
      const bias = randomActivations(dim, next);
      const sum = x.slice();
      addInPlace(sum, y, sum.length);
      const summed = inKernelMemory(x);
      kernels.addInPlace(summed, inKernelMemory(y), summed.length);
      assertSameBits(summed, sum, `addInPlace, ${rows} x ${dim}`);
      const biased = x.slice();
      addBias(biased, bias, rows);
      const biasedHere = inKernelMemory(x);
      kernels.addBias(biasedHere, bias, rows);
      assertSameBits(biasedHere, biased, `addBias, ${rows} x ${dim}`);
    }
  });

  it("argmax gives @infer/core's index: the first of equal largest values, NaNs skipped, 0 for nothing above -Infinity", () => {
    const next = random(23);
    const cases: [string, Float32Array][] = [];
    for (const length of [1, 3, 7, 8, 9, 15, 16, 17, 33, 1000, 49152]) cases.push([`random ${length}`, randomActivations(length, next)]);
    // Ties within a lane, across lanes and in the tail; the maximum in each position mod 8.
    const ties = new Float32Array(37).fill(1);
    for (const at of [4, 9, 20, 36]) ties[at] = 5;
    cases.push(["ties", ties]);
    for (let at = 0; at < 19; at++) {
      const one = new Float32Array(19).fill(-2);
      one[at] = 3;
      cases.push([`max at ${at}`, one]);
    }
    const nans = new Float32Array(21).fill(Number.NaN);
    nans[13] = -1e30;
    cases.push(["NaNs around one value", nans]);
    cases.push(["all NaN", new Float32Array(12).fill(Number.NaN)]);
    cases.push(["all -Infinity", new Float32Array(10).fill(-Infinity)]);
    const infinity = randomActivations(30, next);
    infinity[29] = Infinity;
    infinity[11] = Infinity;
    cases.push(["+Infinity twice", infinity]);
    cases.push(["zeros of both signs", Float32Array.of(-0, 0, -0, 0, 0, 0, 0, 0, 0)]);
    for (const [what, values] of cases) {
      const expected = argmax(values);
      assert.equal(kernels.argmax(inKernelMemory(values)), expected, what);
      assert.equal(kernels.argmax(values), expected, `${what}, outside the kernels' memory`);
    }
    const empty = inKernelMemory(new Float32Array(0));
    assert.equal(kernels.argmax(empty), argmax(new Float32Array(0)));
  });

  it("rejects shapes that do not fit the buffers with INTERNAL, writing nothing", () => {
    const x = inKernelMemory(new Float32Array(12).fill(1));
    const weight = new Float32Array(4).fill(1);
    assertInferenceError(() => kernels.rmsNorm(x, x, weight, 4, 4, 1e-6, 0), "INTERNAL");
    assertInferenceError(() => kernels.rmsNorm(x, x, weight, 1.5, 4, 1e-6, 0), "INTERNAL");
    assertInferenceError(() => kernels.rope(x, 2, 2, 4, Int32Array.of(0, 1), new Float64Array(3), "neox", 1), "INTERNAL");
    assertInferenceError(() => kernels.rope(x, 4, 1, 4, Int32Array.of(0, 1), new Float64Array(2), "neox", 1), "INTERNAL");
    assertInferenceError(() => kernels.addInPlace(x, inKernelMemory(new Float32Array(4)), 12), "INTERNAL");
    assertInferenceError(() => kernels.addBias(x, new Float32Array(5), 3), "INTERNAL");
    assert.deepEqual([...x], new Array(12).fill(1));
  });
});
