// Attention over an f16 KV cache (kvType "f16": keys and values as IEEE half
// bits in a Uint16Array) and a Q8_0 one (kvType "q8_0": blocks in a
// Uint8Array). The WebAssembly kernel against the reference on the same cache
// (the float32 kernel's bound), for f16 and Q8_0 bit for bit against itself on the cache
// decoded to float32, and against the float32 cache it was rounded from (a
// bound from the rounding).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { f16ToF32, f32ToF16 } from "@infer/formats";
import { readKVRow, writeKVRow } from "../../src/kernels/kv-codec.js";
import { referenceAttention } from "../../src/kernels/reference.js";
import type { AttentionParams, Kernels } from "../../src/kernels/types.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, attentionBound, random } from "./helpers.js";

const SHAPES = [
  { numHeads: 8, numKVHeads: 2, headDim: 64, slots: 2, slotLength: 24, window: 0, softcap: 0 },
  { numHeads: 3, numKVHeads: 3, headDim: 36, slots: 2, slotLength: 17, window: 5, softcap: 0 }, // 36: a 4-element tail
  { numHeads: 4, numKVHeads: 1, headDim: 10, slots: 1, slotLength: 40, window: 0, softcap: 30 }, // 10: scalar tails
  { numHeads: 6, numKVHeads: 2, headDim: 20, slots: 2, slotLength: 150, window: 0, softcap: 0 }, // 150 positions: several blocks
  { numHeads: 6, numKVHeads: 2, headDim: 20, slots: 2, slotLength: 1100, window: 0, softcap: 0 }, // 1099 positions: three chunks
];

/** f16 rounding: relative 2^-11 for normal halves, absolute 2^-25 below 2^-14 (subnormals). */
const HALF_RELATIVE = 2 ** -11;
const HALF_ABSOLUTE = 2 ** -25;

/**
 * How far attention over the rounded cache may sit from attention over the
 * float32 one (both exact). A score moves by at most
 * scale * sum_d |q_d| (2^-11 |k_d| + 2^-25); the softmax weights then move by at
 * most 2.2x the largest score change in total (first order, as in
 * attentionBound), so the output moves by that times max|v|, plus the values'
 * own rounding, 2^-11 max|v| + 2^-25.
 */
function roundingBound(q: Float32Array, keys: Float32Array, values: Float32Array, p: AttentionParams, t: number, h: number): number {
  const kvStride = p.numKVHeads * p.headDim;
  const position = p.positions[t]!;
  const first = p.window > 0 ? Math.max(0, position - p.window + 1) : 0;
  const qBase = (t * p.numHeads + h) * p.headDim;
  let worstScore = 0;
  let maxValue = 0;
  for (let j = first; j <= position; j++) {
    const base = (p.seqIds[t]! * p.slotLength + j) * kvStride + Math.floor(h / (p.numHeads / p.numKVHeads)) * p.headDim;
    let change = 0;
    for (let d = 0; d < p.headDim; d++) {
      change += Math.abs(q[qBase + d]!) * (HALF_RELATIVE * Math.abs(keys[base + d]!) + HALF_ABSOLUTE);
      maxValue = Math.max(maxValue, Math.abs(values[base + d]!));
    }
    worstScore = Math.max(worstScore, change * p.scale);
  }
  return maxValue * (2.2 * worstScore + HALF_RELATIVE) + HALF_ABSOLUTE;
}

function checkWithin(
  actual: Float32Array,
  expected: Float32Array,
  p: AttentionParams,
  allowed: (t: number, h: number) => number,
  what: string,
): void {
  for (let t = 0; t < p.tokens; t++) {
    for (let h = 0; h < p.numHeads; h++) {
      const limit = allowed(t, h);
      for (let d = 0; d < p.headDim; d++) {
        const i = (t * p.numHeads + h) * p.headDim + d;
        const error = Math.abs(actual[i]! - expected[i]!);
        if (!(error <= limit)) assert.fail(`${what}: token ${t} head ${h} dim ${d}: ${actual[i]} vs ${expected[i]} (${error} > ${limit})`);
      }
    }
  }
}

for (const threads of [1, 2, 3, 4]) {
  describe(`wasm attention over an f16 cache, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0 })));
    after(() => kernels.dispose?.());

    for (const shape of SHAPES) {
      for (const inArena of [true, false]) {
        const name = `${shape.numHeads}/${shape.numKVHeads} heads of ${shape.headDim}, window ${shape.window}, softcap ${shape.softcap}, cache ${inArena ? "in the kernels' memory" : "staged"}`;
        it(`${name}: matches the reference on the same halves, and the f32 cache within f16 rounding`, () => {
          const next = random(threads * 1000 + shape.headDim);
          const count = shape.slots * shape.slotLength * shape.numKVHeads * shape.headDim;
          const halves = (): { bytes: Uint8Array; bits: Uint16Array } => {
            const bytes = inArena ? kernels.allocate!(count * 2) : new Uint8Array(count * 2);
            return { bytes, bits: new Uint16Array(bytes.buffer, bytes.byteOffset, count) };
          };
          const keys = halves();
          const values = halves();
          // Float32 originals over several binades, a few small enough to round to subnormal halves.
          const original = (): Float32Array =>
            Float32Array.from({ length: count }, () => (next() * 2 - 1) * (next() < 0.05 ? 2 ** -16 : 1 + next() * 3));
          const keys32 = original();
          const values32 = original();
          keys32.forEach((value, i) => (keys.bits[i] = f32ToF16(value)));
          values32.forEach((value, i) => (values.bits[i] = f32ToF16(value)));
          const decodedKeys = Float32Array.from(keys.bits, f16ToF32);
          const decodedValues = Float32Array.from(values.bits, f16ToF32);

          const positions = Int32Array.from([3, 4, 5, 6, 7, ...(shape.slots > 1 ? [shape.slotLength - 1] : [])]);
          const seqIds = Int32Array.from(positions, (_, t) => (t < 5 ? 0 : 1));
          const tokens = positions.length;
          const width = shape.numHeads * shape.headDim;
          const q = Float32Array.from({ length: tokens * width }, () => (next() * 2 - 1) * 2);
          const params: AttentionParams = { ...shape, tokens, positions, seqIds, scale: 1 / Math.sqrt(shape.headDim) };

          const run = (attention: typeof referenceAttention, k: Float32Array | Uint16Array, v: Float32Array | Uint16Array): Float32Array => {
            const out = new Float32Array(tokens * width).fill(NaN);
            attention(out, q, k, v, params);
            return out;
          };
          const wasmHalf = run(kernels.attention!, keys.bits, values.bits);
          const referenceHalf = run(referenceAttention, keys.bits, values.bits);
          // The reference decodes exactly, so it equals itself on the decoded floats.
          assert.deepEqual(referenceHalf, run(referenceAttention, decodedKeys, decodedValues));
          // The SIMD widening is exact and the arithmetic the float32 path's, in the same order.
          assert.deepEqual(wasmHalf, run(kernels.attention!, decodedKeys, decodedValues));
          checkWithin(wasmHalf, referenceHalf, params, (t, h) => attentionBound(q, decodedKeys, decodedValues, params, t, h), "vs reference on f16");

          const reference32 = run(referenceAttention, keys32, values32);
          const bound = (t: number, h: number): number =>
            roundingBound(q, keys32, values32, params, t, h) + attentionBound(q, decodedKeys, decodedValues, params, t, h);
          checkWithin(wasmHalf, reference32, params, bound, "vs reference on f32");
          if (inArena) {
            kernels.release!(keys.bytes);
            kernels.release!(values.bytes);
          }
        });
      }
    }
  });
}

describe("wasm attention over an f16 cache holding infinities and NaN", () => {
  // Blocks of finite halves take a shorter conversion than blocks holding an
  // exponent-31 half; these must still decode exactly, so the outputs are the
  // float32 path's on the decoded floats, NaN for NaN.
  for (const threads of [1, 2, 3, 4]) {
    it(`${threads} thread${threads > 1 ? "s" : ""}: the same outputs as the decoded float32 cache, NaN where the reference has NaN`, async () => {
      const kernels = await createWasmKernels({ threads, minBytesPerThread: 0 });
      try {
        const shape = { numHeads: 6, numKVHeads: 2, headDim: 20, slots: 1, slotLength: 150, window: 0, softcap: 0 };
        const next = random(77 + threads);
        const kvDim = shape.numKVHeads * shape.headDim;
        const count = shape.slotLength * kvDim;
        const keys = Uint16Array.from({ length: count }, () => f32ToF16((next() * 2 - 1) * 2));
        const values = Uint16Array.from({ length: count }, () => f32ToF16((next() * 2 - 1) * 2));
        const at = (position: number, kvHead: number, element: number): number => position * kvDim + kvHead * shape.headDim + element;
        keys[at(70, 1, 18)] = 0x7c00; // +inf, in a head's scalar tail (elements 16..19 of 20), second block of 64 positions
        keys[at(30, 1, 2)] = 0xfc00; // -inf, first block
        values[at(100, 0, 3)] = 0x7e00; // NaN, second block
        const positions = Int32Array.of(5, 29, 69, 70, 100, 149);
        const tokens = positions.length;
        const width = shape.numHeads * shape.headDim;
        const q = Float32Array.from({ length: tokens * width }, () => (next() * 2 - 1) * 2);
        const params: AttentionParams = { ...shape, tokens, positions, seqIds: new Int32Array(tokens), scale: 1 / Math.sqrt(shape.headDim) };
        const run = (attention: typeof referenceAttention, k: Float32Array | Uint16Array, v: Float32Array | Uint16Array): Float32Array => {
          const out = new Float32Array(tokens * width);
          attention(out, q, k, v, params);
          return out;
        };
        const wasmHalf = run(kernels.attention!, keys, values);
        assert.deepEqual(wasmHalf, run(kernels.attention!, Float32Array.from(keys, f16ToF32), Float32Array.from(values, f16ToF32)));
        const reference = run(referenceAttention, keys, values);
        const nan = (out: Float32Array): boolean[] => Array.from(out, Number.isNaN);
        assert.deepEqual(nan(wasmHalf), nan(reference));
        // Both kinds of output occur: the special halves reached some heads and not others.
        assert.ok(nan(wasmHalf).includes(true) && nan(wasmHalf).includes(false));
      } finally {
        await kernels.dispose?.();
      }
    });
  }
});

describe("wasm attention: mixed encodings", () => {
  let kernels: Kernels;
  before(async () => (kernels = await createWasmKernels({ threads: 1 })));
  after(() => kernels.dispose?.());

  it("keys in f16 with values in f32 (or the reverse) are refused", () => {
    const params = { numHeads: 1, numKVHeads: 1, headDim: 4, slotLength: 2, window: 0, softcap: 0, scale: 1, tokens: 1, positions: Int32Array.of(0), seqIds: Int32Array.of(0) };
    const out = new Float32Array(4);
    const q = new Float32Array(4);
    for (const attention of [kernels.attention!, referenceAttention]) {
      assertInferenceError(() => attention(out, q, new Uint16Array(8), new Float32Array(8), params), "INTERNAL", /encoding/);
      assertInferenceError(() => attention(out, q, new Float32Array(8), new Uint16Array(8), params), "INTERNAL", /encoding/);
      assertInferenceError(() => attention(out, q, new Uint8Array(68), new Uint16Array(8), params), "INTERNAL", /encoding/);
    }
  });
});

/** Q8_0 shapes: rows of a multiple of 32 elements; heads of 8 inside one block, of 48 across blocks, of 6 with scalar tails. */
const Q8_SHAPES = [
  { numHeads: 8, numKVHeads: 2, headDim: 64, slots: 2, slotLength: 24, window: 0, softcap: 0 },
  { numHeads: 8, numKVHeads: 4, headDim: 8, slots: 2, slotLength: 17, window: 5, softcap: 0 },
  { numHeads: 4, numKVHeads: 2, headDim: 48, slots: 1, slotLength: 20, window: 0, softcap: 30 },
  { numHeads: 16, numKVHeads: 16, headDim: 6, slots: 2, slotLength: 12, window: 0, softcap: 0 },
  { numHeads: 6, numKVHeads: 2, headDim: 16, slots: 2, slotLength: 150, window: 100, softcap: 0 }, // a window across blocks
  { numHeads: 6, numKVHeads: 2, headDim: 16, slots: 2, slotLength: 1100, window: 700, softcap: 0 }, // a window across chunks
];

/**
 * How far attention over perturbed keys and values may sit from attention over
 * the originals (both exact), given the actual perturbation: a score moves by
 * at most scale * sum_d |q_d| |Δk_d|, the softmax weights by at most 2.2x the
 * largest score change in total (first order), so the output by that times
 * max|v| plus the largest |Δv|.
 */
function perturbationBound(
  q: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  decodedKeys: Float32Array,
  decodedValues: Float32Array,
  p: AttentionParams,
  t: number,
  h: number,
): number {
  const kvStride = p.numKVHeads * p.headDim;
  const position = p.positions[t]!;
  const first = p.window > 0 ? Math.max(0, position - p.window + 1) : 0;
  const qBase = (t * p.numHeads + h) * p.headDim;
  let worstScore = 0;
  let maxValue = 0;
  let worstValueChange = 0;
  for (let j = first; j <= position; j++) {
    const base = (p.seqIds[t]! * p.slotLength + j) * kvStride + Math.floor(h / (p.numHeads / p.numKVHeads)) * p.headDim;
    let change = 0;
    for (let d = 0; d < p.headDim; d++) {
      change += Math.abs(q[qBase + d]!) * Math.abs(decodedKeys[base + d]! - keys[base + d]!);
      maxValue = Math.max(maxValue, Math.abs(values[base + d]!));
      worstValueChange = Math.max(worstValueChange, Math.abs(decodedValues[base + d]! - values[base + d]!));
    }
    worstScore = Math.max(worstScore, change * p.scale);
  }
  return maxValue * 2.2 * worstScore + worstValueChange;
}

for (const threads of [1, 2, 3, 4]) {
  describe(`wasm attention over a q8_0 cache, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0 })));
    after(() => kernels.dispose?.());

    for (const shape of Q8_SHAPES) {
      for (const inArena of [true, false]) {
        const name = `${shape.numHeads}/${shape.numKVHeads} heads of ${shape.headDim}, window ${shape.window}, softcap ${shape.softcap}, cache ${inArena ? "in the kernels' memory" : "staged"}`;
        it(`${name}: matches the reference on the same blocks, and the f32 cache within the quantization's bound`, () => {
          const next = random(threads * 2000 + shape.headDim);
          const kvDim = shape.numKVHeads * shape.headDim;
          const rows = shape.slots * shape.slotLength;
          const count = rows * kvDim;
          const blocks = (original: Float32Array): { bytes: Uint8Array; decoded: Float32Array } => {
            const byteCount = (count / 32) * 34;
            const bytes = inArena ? kernels.allocate!(byteCount) : new Uint8Array(byteCount);
            for (let row = 0; row < rows; row++) writeKVRow(bytes, row * kvDim, original.subarray(row * kvDim, (row + 1) * kvDim));
            return { bytes, decoded: readKVRow(bytes, 0, count) };
          };
          // Rows whose blocks differ in scale, as real keys' heads do.
          const original = (): Float32Array => Float32Array.from({ length: count }, (_, i) => (next() * 2 - 1) * (1 + ((i >> 5) % 4)));
          const keys32 = original();
          const values32 = original();
          const keys = blocks(keys32);
          const values = blocks(values32);

          const positions = Int32Array.from([3, 4, 5, 6, 7, ...(shape.slots > 1 ? [shape.slotLength - 1] : [])]);
          const seqIds = Int32Array.from(positions, (_, t) => (t < 5 ? 0 : 1));
          const tokens = positions.length;
          const width = shape.numHeads * shape.headDim;
          const q = Float32Array.from({ length: tokens * width }, () => (next() * 2 - 1) * 2);
          const params: AttentionParams = { ...shape, tokens, positions, seqIds, scale: 1 / Math.sqrt(shape.headDim) };
          const run = (attention: typeof referenceAttention, k: Float32Array | Uint8Array, v: Float32Array | Uint8Array): Float32Array => {
            const out = new Float32Array(tokens * width).fill(NaN);
            attention(out, q, k, v, params);
            return out;
          };

          const wasmQ8 = run(kernels.attention!, keys.bytes, values.bytes);
          // Each block of positions is decoded exactly (an int8 times a half) and run through the
          // float32 path, so the outputs are that path's on the decoded floats, bit for bit.
          assert.deepEqual(wasmQ8, run(kernels.attention!, keys.decoded, values.decoded));
          const referenceQ8 = run(referenceAttention, keys.bytes, values.bytes);
          assert.deepEqual(referenceQ8, run(referenceAttention, keys.decoded, values.decoded));
          const tight = (t: number, h: number): number => attentionBound(q, keys.decoded, values.decoded, params, t, h);
          checkWithin(wasmQ8, referenceQ8, params, tight, "vs reference on q8_0");
          const reference32 = run(referenceAttention, keys32, values32);
          const bound = (t: number, h: number): number =>
            perturbationBound(q, keys32, values32, keys.decoded, values.decoded, params, t, h) + tight(t, h);
          checkWithin(wasmQ8, reference32, params, bound, "vs reference on f32");
          if (inArena) {
            kernels.release!(keys.bytes);
            kernels.release!(values.bytes);
          }
        });
      }
    }

    it("q8_0 rows whose length is not a multiple of 32 are refused", () => {
      const params = { numHeads: 1, numKVHeads: 1, headDim: 16, slotLength: 2, window: 0, softcap: 0, scale: 1, tokens: 1, positions: Int32Array.of(0), seqIds: Int32Array.of(0) };
      assertInferenceError(() => kernels.attention!(new Float32Array(16), new Float32Array(16), new Uint8Array(68), new Uint8Array(68), params), "INTERNAL", /multiple of 32/);
    });
  });
}
