/**
 * kvType "f16" and "q8_0" on a real model (stories260K): the cache takes half
 * (f16) or 34/128 (q8_0) of the float32 bytes, logits stay close to the float32
 * cache's, greedy decoding still gives llama2.c's published text, and a model
 * loaded through the public API hands inspectAttention float32 keys.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isAttentionInspector, isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import { getStringArray, f16ToF32, f32ToF16, GgmlType } from "@infer/formats";
import "../../src/index.js";
import type { KVCacheType } from "../../src/engine/cache.js";
import type { Transformer } from "../../src/engine/transformer.js";
import { loadTransformer } from "../../src/load/load.js";
import { readKVRow, writeKVRow } from "../../src/kernels/kv-codec.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { writeRandomGguf } from "../../src/testing/index.js";
import { decodeWithGgufVocab, greedy } from "./greedy.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "./helpers.js";

const skip = skipWithoutSharedModels();
const MODEL = join(SHARED_MODELS, "stories260K", "stories260K.gguf");

/**
 * Largest logit difference allowed, as a share of the f32 row's spread (max -
 * min). f16 rounds keys and values by at most 2^-11 ≈ 5e-4 of themselves; that
 * perturbs each layer's attention output by about as much, and 5 layers
 * compound it. Q8_0 rounds by up to half a step of max|x| / 127 per block of 32,
 * and stories260K's blocks span four KV heads of 8 whose sizes differ, so a
 * small head's keys lose far more than 4e-3 of themselves. Measured (see the
 * diagnostics): f16 5.3e-4 (tolerance ten times that), q8_0 3.1e-2 (twice).
 */
const LOGIT_TOLERANCE: Record<Exclude<KVCacheType, "f32">, number> = { f16: 5e-3, q8_0: 6e-2 };

/** Feeds BOS and `ids`, one token per forward on an f32 cache; per step, (top - second) / (max - min) of the logits. */
function topTwoGaps(transformer: Transformer, ids: number[]): number[] {
  const cache = transformer.createCache(1, ids.length + 1);
  const gaps: number[] = [];
  for (let step = 0; step < ids.length; step++) {
    const token = step === 0 ? 1 : ids[step - 1]!;
    const logits = transformer.forward(
      { tokens: Int32Array.of(token), positions: Int32Array.of(step), seqIds: Int32Array.of(0), logitRows: Int32Array.of(0) },
      cache,
    );
    const sorted = Float32Array.from(logits).sort().reverse();
    gaps.push((sorted[0]! - sorted[1]!) / (sorted[0]! - sorted.at(-1)!));
  }
  cache.dispose();
  return gaps;
}

/** `row` as a cache of `kvType` would give it back. */
function roundTrip(kvType: KVCacheType, row: Float32Array): Float32Array {
  const buffer = kvType === "f16" ? new Uint16Array(row.length) : new Uint8Array((row.length / 32) * 34);
  writeKVRow(buffer, 0, row);
  return readKVRow(buffer, 0, row.length);
}

describe("KV cache types on stories260K", { skip }, () => {
  let transformer: Transformer;
  let vocab: string[];
  before(async () => {
    const loaded = await loadTransformer(MODEL, { kernels: await createWasmKernels({ threads: 1 }) });
    transformer = loaded.transformer;
    assert.ok(loaded.metadata.format === "gguf");
    vocab = getStringArray(loaded.metadata.gguf.metadata, "tokenizer.ggml.tokens", true).toArray();
  });
  // The transformer's dispose stops the kernels it was given too.
  after(() => transformer?.dispose());

  it("the cache takes 4, 2 and 34/32 bytes per element", () => {
    const { numLayers, numKVHeads, headDim } = transformer.config;
    const elements = numLayers * 2 * 2 * 64 * numKVHeads * headDim; // 2 slots x 64 positions
    for (const [kvType, bytes] of [["f32", elements * 4], ["f16", elements * 2], ["q8_0", (elements / 32) * 34]] as const) {
      const cache = transformer.createCache(2, 64, kvType);
      assert.equal(cache.bytes, bytes, kvType);
      cache.dispose();
    }
  });

  it("a stored row reads back as its f16 rounding, and within half a Q8_0 step", () => {
    const row = Float32Array.from({ length: 32 * 3 }, (_, i) => Math.sin(i * 1.7) * (1 + (i >> 5)) + 1e-6 * i);
    assert.deepEqual(roundTrip("f16", row), Float32Array.from(row, (value) => f16ToF32(f32ToF16(value))));
    const q8 = roundTrip("q8_0", row);
    for (let block = 0; block < 3; block++) {
      const slice = row.subarray(block * 32, (block + 1) * 32);
      const step = Math.max(...slice.map(Math.abs)) / 127;
      // Half a step from rounding q, plus the f16 rounding of the step itself (2^-11 of it, times |q| <= 127).
      const allowed = step * (0.5 + 127 * 2 ** -11);
      for (let i = 0; i < 32; i++) {
        const error = Math.abs(q8[block * 32 + i]! - slice[i]!);
        assert.ok(error <= allowed, `block ${block} element ${i}: ${q8[block * 32 + i]} vs ${slice[i]} (${error} > ${allowed})`);
      }
    }
    const cache = transformer.createCache(1, 4, "q8_0");
    const key = row.subarray(0, cache.kvDim);
    cache.store(0, cache.offset(0, 2), key, key);
    assert.deepEqual(cache.readKeys(0, cache.offset(0, 2), cache.kvDim), roundTrip("q8_0", key));
    cache.dispose();
  });

  for (const kvType of ["f16", "q8_0"] as const) {
    const tolerance = LOGIT_TOLERANCE[kvType];
    it(`${kvType}: logits over a 64-token prompt stay within ${tolerance} of the spread of the f32 cache's`, (t) => {
      const prompt = Int32Array.from({ length: 64 }, (_, i) => (i === 0 ? 1 : 1 + ((i * 37) % 500)));
      const batch = {
        tokens: prompt,
        positions: Int32Array.from(prompt, (_, i) => i),
        seqIds: new Int32Array(prompt.length),
        logitRows: Int32Array.from(prompt, (_, i) => i),
      };
      const f32Cache = transformer.createCache(1, 64);
      const cache = transformer.createCache(1, 64, kvType);
      const expected = transformer.forward(batch, f32Cache).slice();
      const actual = transformer.forward(batch, cache).slice();
      const vocabSize = transformer.config.vocabSize;
      let worst = 0;
      for (let row = 0; row < prompt.length; row++) {
        const expectedRow = expected.subarray(row * vocabSize, (row + 1) * vocabSize);
        const actualRow = actual.subarray(row * vocabSize, (row + 1) * vocabSize);
        const spread = Math.max(...expectedRow) - Math.min(...expectedRow);
        for (let i = 0; i < vocabSize; i++) worst = Math.max(worst, Math.abs(actualRow[i]! - expectedRow[i]!) / spread);
      }
      t.diagnostic(`${kvType}: largest logit difference ${worst.toExponential(2)} of the row's spread`);
      assert.ok(worst > 0, "the cache should round something");
      assert.ok(worst <= tolerance, `largest logit difference ${worst} of the spread`);
      f32Cache.dispose();
      cache.dispose();
    });

    it(`${kvType}: greedy 200 tokens from BOS equal llama2.c's published text${kvType === "q8_0" ? " up to a near-tie" : ""}`, async (t) => {
      const expected = (await readFile(join(SHARED_MODELS, "stories260K", "expected-greedy-200.txt"), "utf8")).replace(/\n$/, "");
      const text = (ids: number[]): string => decodeWithGgufVocab(vocab, ids).replace(/^ /, "");
      const cache = transformer.createCache(1, 256, kvType);
      const ids = greedy(transformer, cache, [1], 200);
      cache.dispose();
      if (kvType === "f16") {
        assert.equal(text(ids), expected);
        return;
      }
      // Q8_0 moves logits by up to 3e-2 of their spread here, more than some of the f32 run's
      // top-two gaps: the f32 greedy path (the published text) is followed until a step whose two
      // best tokens are closer than the logits can move; there the choice may flip.
      const f32Cache = transformer.createCache(1, 256);
      const reference = greedy(transformer, f32Cache, [1], 200);
      f32Cache.dispose();
      assert.equal(text(reference), expected);
      const diverged = ids.findIndex((id, i) => id !== reference[i]);
      if (diverged < 0) return;
      const gap = topTwoGaps(transformer, reference.slice(0, diverged + 1))[diverged]!;
      t.diagnostic(`q8_0 follows the published text for ${diverged} tokens; there the f32 top-two gap is ${gap.toExponential(2)} of the spread`);
      assert.ok(gap <= 2 * tolerance, `q8_0 left the published text at token ${diverged}, where f32's top two differ by ${gap} of the spread: no near-tie`);
      // Measured: 114 tokens. A broken cache leaves the text within a few tokens.
      assert.ok(diverged >= 100, `q8_0 left the published text at token ${diverged}`);
      assert.ok(expected.startsWith(text(ids.slice(0, diverged))));
    });
  }
});

describe("kvType through loadModel", () => {
  for (const kvType of ["F16", "q8_0"]) {
    it(`${kvType}: inspectAttention gives float32 keys, layer 0's the f32 model's rounded`, { skip }, async () => {
      await using f32 = await loadModel(MODEL, { backend: "wasm", contextLength: 32, threads: 1 });
      await using other = await loadModel(MODEL, { backend: "wasm", contextLength: 32, threads: 1, kvType });
      assert.ok(isAttentionInspector(f32) && isAttentionInspector(other));
      const expected = await f32.inspectAttention("Once upon a time");
      const actual = await other.inspectAttention("Once upon a time");
      assert.equal(actual.seqLen, expected.seqLen);
      const { numKVHeads, headDim } = expected;
      for (let head = 0; head < numKVHeads; head++) assert.ok(actual.keys[0]![head] instanceof Float32Array);
      // Layer 0's keys come from the same float32 arithmetic either way: the cache holds exactly their encoding.
      for (let p = 0; p < expected.seqLen; p++) {
        const row = new Float32Array(numKVHeads * headDim); // one position's keys, all heads
        for (let head = 0; head < numKVHeads; head++) row.set(expected.keys[0]![head]!.subarray(p * headDim, (p + 1) * headDim), head * headDim);
        const rounded = roundTrip(kvType.toLowerCase() as KVCacheType, row);
        for (let head = 0; head < numKVHeads; head++) {
          assert.deepEqual(actual.keys[0]![head]!.subarray(p * headDim, (p + 1) * headDim), rounded.subarray(head * headDim, (head + 1) * headDim));
        }
      }
    });
  }

  it("q8_0 on a model whose KV rows are not a multiple of 32 is refused as UNSUPPORTED, naming kvType", async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-kv-"));
    try {
      const path = join(dir, "llama.gguf");
      const dims = await writeRandomGguf(path, { architecture: "llama", seed: 5, type: GgmlType.F32, numKVHeads: 1 });
      assert.notEqual((dims.numKVHeads * dims.headDim) % 32, 0);
      await assert.rejects(loadModel(path, { backend: "wasm", kvType: "q8_0", threads: 1 }), (error: unknown) => {
        assert.ok(isInferenceError(error, "UNSUPPORTED"), String(error));
        assert.match((error as Error).message, /kvType q8_0/);
        return true;
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
