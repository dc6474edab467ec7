// The WebAssembly attention against the reference attention, with the KV cache
// in the kernels' memory (allocate, read in place) or in ordinary arrays
// (staged), grouped-query heads, several cache slots, a prefill batch and
// decode tokens, sliding window and soft-capping, 1-3 threads.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { referenceAttention } from "../../src/kernels/reference.js";
import type { AttentionParams, Kernels } from "../../src/kernels/types.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, random } from "./helpers.js";

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

/**
 * Per output element, the distance allowed from the float64 reference. A score
 * is a float32 dot product of headDim terms: off by at most
 * (headDim / 4 + 8) * 2^-23 * scale * sum_d |q_d k_d| (soft-capping's tanh only
 * shrinks differences). Logits off by at most δ move the softmax weights by at
 * most 2δ in total (to first order; 2.2δ allowed), so the output moves by at most
 * max|v| * 2.2δ, plus float32 accumulation over the positions:
 * (positions + 8) * 2^-23 * max|v|.
 */
function bound(q: Float32Array, keys: Float32Array, values: Float32Array, p: AttentionParams, t: number, h: number): number {
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

for (const threads of [1, 2, 3]) {
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
