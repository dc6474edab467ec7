// The WebAssembly attention against the reference attention, with the KV cache
// in the kernels' memory (allocate, read in place) or in ordinary arrays
// (staged), grouped-query heads, several cache slots, a prefill batch and
// decode tokens, sliding window and soft-capping, 1-4 threads.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { referenceAttention } from "../../src/kernels/reference.js";
import type { AttentionParams, Kernels } from "../../src/kernels/types.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, attentionBound as bound, random } from "./helpers.js";

interface Shape {
  numHeads: number;
  numKVHeads: number;
  headDim: number;
  slots: number;
  slotLength: number;
  window: number;
  softcap: number;
}

const SHAPES: Shape[] = [
  { numHeads: 8, numKVHeads: 2, headDim: 64, slots: 2, slotLength: 24, window: 0, softcap: 0 },
  { numHeads: 3, numKVHeads: 3, headDim: 36, slots: 3, slotLength: 17, window: 5, softcap: 0 },
  { numHeads: 4, numKVHeads: 1, headDim: 8, slots: 1, slotLength: 40, window: 0, softcap: 30 },
  // Past the kernel's 64-position blocks: slot 1's token reads 150 positions (blocks of 64, 64, 22),
  // slot 2's a window of 100 crossing a block edge; three query heads share each KV head.
  { numHeads: 6, numKVHeads: 2, headDim: 20, slots: 3, slotLength: 151, window: 0, softcap: 0 },
  { numHeads: 6, numKVHeads: 2, headDim: 20, slots: 3, slotLength: 151, window: 100, softcap: 0 },
  // Past the kernel's 512-position chunks, which threads take apart and attentionCombine merges:
  // slot 1's token reads 1199 positions (chunks of 512, 512, 175), slot 2's a window of 600 across
  // a chunk edge; the prefill tokens of slot 0 stay within one chunk in the same call.
  { numHeads: 9, numKVHeads: 3, headDim: 20, slots: 3, slotLength: 1200, window: 0, softcap: 0 },
  { numHeads: 4, numKVHeads: 1, headDim: 36, slots: 3, slotLength: 1200, window: 600, softcap: 30 },
];

/** A batch: 5 prefill tokens of slot 0 at positions 3..7, and one decode token per other slot. */
function batchFor(shape: Shape): { positions: Int32Array; seqIds: Int32Array } {
  const positions = [3, 4, 5, 6, 7];
  const seqIds = [0, 0, 0, 0, 0];
  for (let slot = 1; slot < shape.slots; slot++) {
    positions.push(shape.slotLength - slot);
    seqIds.push(slot);
  }
  return { positions: Int32Array.from(positions), seqIds: Int32Array.from(seqIds) };
}

for (const threads of [1, 2, 3, 4]) {
  describe(`wasm attention, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0 })));
    after(() => kernels.dispose?.());

    for (const shape of SHAPES) {
      for (const inArena of [true, false]) {
        const name = `${shape.numHeads}/${shape.numKVHeads} heads of ${shape.headDim}, window ${shape.window}, softcap ${shape.softcap}`;
        it(`${name}, cache ${inArena ? "in the kernels' memory" : "in ordinary arrays"}: matches the reference within its bound`, () => {
          const next = random(threads * 100 + shape.headDim);
          const cacheFloats = shape.slots * shape.slotLength * shape.numKVHeads * shape.headDim;
          const keyBytes = inArena ? kernels.allocate!(cacheFloats * 4) : new Uint8Array(cacheFloats * 4);
          const valueBytes = inArena ? kernels.allocate!(cacheFloats * 4) : new Uint8Array(cacheFloats * 4);
          const keys = new Float32Array(keyBytes.buffer, keyBytes.byteOffset, cacheFloats);
          const values = new Float32Array(valueBytes.buffer, valueBytes.byteOffset, cacheFloats);
          for (let i = 0; i < cacheFloats; i++) {
            keys[i] = next() * 2 - 1;
            values[i] = next() * 2 - 1;
          }
          const { positions, seqIds } = batchFor(shape);
          const tokens = positions.length;
          const width = shape.numHeads * shape.headDim;
          const q = Float32Array.from({ length: tokens * width }, () => (next() * 2 - 1) * 3);
          const params: AttentionParams = { ...shape, tokens, positions, seqIds, scale: 1 / Math.sqrt(shape.headDim) };

          const expected = new Float32Array(tokens * width);
          referenceAttention(expected, q, keys, values, params);
          const actual = new Float32Array(tokens * width).fill(NaN);
          kernels.attention!(actual, q, keys, values, params);
          for (let t = 0; t < tokens; t++) {
            for (let h = 0; h < shape.numHeads; h++) {
              const allowed = bound(q, keys, values, params, t, h);
              for (let d = 0; d < shape.headDim; d++) {
                const i = (t * shape.numHeads + h) * shape.headDim + d;
                const error = Math.abs(actual[i]! - expected[i]!);
                if (!(error <= allowed)) assert.fail(`token ${t} head ${h} dim ${d}: ${actual[i]} vs ${expected[i]} (error ${error} > ${allowed})`);
              }
            }
          }
          if (inArena) {
            kernels.release!(keyBytes);
            kernels.release!(valueBytes);
          }
        });
      }
    }
  });
}

describe("wasm attention: chunks of positions", () => {
  it("a token split into chunks gives the same bits at 1, 2, 3 and 4 threads", async () => {
    const shape = { numHeads: 9, numKVHeads: 3, headDim: 64, slotLength: 1200, window: 0, softcap: 0 };
    const next = random(4242);
    const cacheFloats = shape.slotLength * shape.numKVHeads * shape.headDim;
    const keys = Float32Array.from({ length: cacheFloats }, () => next() * 2 - 1);
    const values = Float32Array.from({ length: cacheFloats }, () => next() * 2 - 1);
    // Decode at 1151 positions (three chunks), a token of two chunks and short ones beside them.
    const positions = Int32Array.of(1150, 0, 1, 600);
    const params: AttentionParams = { ...shape, tokens: positions.length, positions, seqIds: new Int32Array(positions.length), scale: 0.125 };
    const q = Float32Array.from({ length: positions.length * shape.numHeads * shape.headDim }, () => (next() * 2 - 1) * 3);
    const outputs: Float32Array[] = [];
    for (const threads of [1, 2, 3, 4]) {
      const kernels = await createWasmKernels({ threads, minBytesPerThread: 0 });
      try {
        const out = new Float32Array(q.length).fill(NaN);
        kernels.attention!(out, q, keys, values, params);
        outputs.push(out);
      } finally {
        await kernels.dispose?.();
      }
    }
    for (const out of outputs.slice(1)) assert.deepEqual(out, outputs[0]);
    const expected = new Float32Array(q.length);
    referenceAttention(expected, q, keys, values, params);
    for (let t = 0; t < params.tokens; t++) {
      for (let h = 0; h < shape.numHeads; h++) {
        const allowed = bound(q, keys, values, params, t, h);
        for (let d = 0; d < shape.headDim; d++) {
          const i = (t * shape.numHeads + h) * shape.headDim + d;
          assert.ok(Math.abs(outputs[0]![i]! - expected[i]!) <= allowed, `token ${t} head ${h} dim ${d}`);
        }
      }
    }
  });
});

describe("wasm attention: staging and bad input", () => {
  let kernels: Kernels;
  before(async () => (kernels = await createWasmKernels({ threads: 2 })));
  after(() => kernels.dispose?.());

  const shape = { numHeads: 2, numKVHeads: 1, headDim: 4, slotLength: 8, window: 0, softcap: 0, scale: 0.5 };

  it("a staged cache is re-read on every call: changed positions are seen", () => {
    const next = random(9);
    const keys = Float32Array.from({ length: 8 * 4 }, next);
    const values = Float32Array.from({ length: 8 * 4 }, next);
    const q = Float32Array.from({ length: 2 * 4 }, next);
    const params = { ...shape, tokens: 1, positions: Int32Array.of(3), seqIds: Int32Array.of(0) };
    const first = new Float32Array(8);
    kernels.attention!(first, q, keys, values, params);
    values.fill(0.25, 0, 4 * 4); // every visible value becomes 0.25: so does the output
    const second = new Float32Array(8);
    kernels.attention!(second, q, keys, values, params);
    assert.notDeepEqual(second, first);
    for (const value of second) assert.ok(Math.abs(value - 0.25) < 1e-6, `${value}`);
  });

  it("softmax at the exponential's edges: weights under e^-87 vanish, one dominant key takes all, ties split evenly", () => {
    // Keys along q's direction: score_j = 0.5 * 4 * 60 * k_j, so the scores 120 * k_j
    // run far beyond the f32 exponential's range; position 5 (k = 2) wins by 120.
    const keyScale = [0, -3, 1, -1, 0.5, 2, -10, 1];
    const keys = Float32Array.from({ length: 8 * 4 }, (_, i) => keyScale[Math.floor(i / 4)]!);
    const values = Float32Array.from({ length: 8 * 4 }, (_, i) => Math.floor(i / 4) + 0.125 * (i % 4));
    const q = new Float32Array(2 * 4).fill(60);
    const out = new Float32Array(8).fill(NaN);
    kernels.attention!(out, q, keys, values, { ...shape, tokens: 1, positions: Int32Array.of(7), seqIds: Int32Array.of(0) });
    assert.deepEqual(Array.from(out), [5, 5.125, 5.25, 5.375, 5, 5.125, 5.25, 5.375]);
    // Three equal best keys (positions 2, 5 and 7 at k = 1; the next, k = 0.5, 60 below): a third each.
    keys.fill(1, 5 * 4, 6 * 4);
    const tied = new Float32Array(8).fill(NaN);
    kernels.attention!(tied, q, keys, values, { ...shape, tokens: 1, positions: Int32Array.of(7), seqIds: Int32Array.of(0) });
    tied.forEach((value, i) => assert.ok(Math.abs(value - (14 / 3 + 0.125 * (i % 4))) < 1e-6, `${i}: ${value}`));
  });

  it("rejects positions and slots outside the cache", () => {
    const bytes = kernels.allocate!(8 * 4 * 4);
    const cache = new Float32Array(bytes.buffer, bytes.byteOffset, 8 * 4);
    const q = new Float32Array(8);
    const out = new Float32Array(8);
    const at = (position: number, seq: number) => ({ ...shape, tokens: 1, positions: Int32Array.of(position), seqIds: Int32Array.of(seq) });
    assertInferenceError(() => kernels.attention!(out, q, cache, cache, at(8, 0)), "INTERNAL", /outside the cache/);
    assertInferenceError(() => kernels.attention!(out, q, cache, cache, at(0, 1)), "INTERNAL", /outside the cache/);
    assertInferenceError(() => kernels.attention!(out, q, cache, cache, { ...at(0, 0), numKVHeads: 3 }), "INTERNAL", /group/);
    kernels.release!(bytes);
  });
});
