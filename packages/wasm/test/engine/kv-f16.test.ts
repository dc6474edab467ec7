/**
 * kvType "f16" on a real model (stories260K): the cache takes half the bytes,
 * logits stay close to the float32 cache's, greedy decoding still gives
 * llama2.c's published text, and a model loaded through the public API with
 * kvType "f16" hands inspectAttention float32 keys.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isAttentionInspector, isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import "../../src/index.js";
import { loadTransformer, type Transformer } from "../../src/engine/transformer.js";
import { f16ToF32, f32ToF16 } from "../../src/formats/half.js";
import { GgufValueType } from "../../src/formats/gguf-values.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { decodeWithGgufVocab, greedy } from "./greedy.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "./helpers.js";

const skip = skipWithoutSharedModels();
const MODEL = join(SHARED_MODELS, "stories260K", "stories260K.gguf");

/**
 * Largest logit difference allowed, as a share of the f32 row's spread (max -
 * min). Rounding keys and values to f16 (relative 2^-11 ≈ 5e-4) perturbs every
 * layer's attention output by about that much relative to its size; 5 layers
 * compound to about 1e-3 of the spread. Measured: 5.3e-4 (see the diagnostic);
 * the tolerance leaves about ten times that.
 */
const LOGIT_TOLERANCE = 5e-3;

describe("kvType f16 on stories260K", { skip }, () => {
  let transformer: Transformer;
  let vocab: string[];
  before(async () => {
    const loaded = await loadTransformer(MODEL, { kernels: await createWasmKernels({ threads: 1 }) });
    transformer = loaded.transformer;
    const vocabEntry = loaded.metadata.format === "gguf" ? loaded.metadata.gguf.metadata.get("tokenizer.ggml.tokens") : undefined;
    assert.ok(vocabEntry?.type === GgufValueType.ARRAY);
    vocab = vocabEntry.value as string[];
  });
  // The transformer's dispose stops the kernels it was given too.
  after(() => transformer?.dispose());

  it("the cache takes half the bytes of a float32 one", () => {
    const f32 = transformer.createCache(2, 64);
    const f16 = transformer.createCache(2, 64, "f16");
    const { numLayers, numKVHeads, headDim } = transformer.config;
    assert.equal(f32.bytes, numLayers * 2 * 2 * 64 * numKVHeads * headDim * 4);
    assert.equal(f16.bytes * 2, f32.bytes);
    f32.dispose();
    f16.dispose();
  });

  it("a stored row reads back as its f16 rounding", () => {
    const cache = transformer.createCache(1, 4, "f16");
    const row = Float32Array.from({ length: cache.kvDim }, (_, i) => Math.sin(i * 1.7) * 3 + 1e-6 * i);
    cache.store(0, cache.offset(0, 2), row, row);
    const read = cache.readKeys(0, cache.offset(0, 2), cache.kvDim);
    assert.deepEqual(read, Float32Array.from(row, (value) => f16ToF32(f32ToF16(value))));
    cache.dispose();
  });

  it(`logits over a 64-token prompt stay within ${LOGIT_TOLERANCE} of the spread of the f32 cache's`, (t) => {
    const prompt = Int32Array.from({ length: 64 }, (_, i) => (i === 0 ? 1 : 1 + ((i * 37) % 500)));
    const batch = {
      tokens: prompt,
      positions: Int32Array.from(prompt, (_, i) => i),
      seqIds: new Int32Array(prompt.length),
      logitRows: Int32Array.from(prompt, (_, i) => i),
    };
    const f32Cache = transformer.createCache(1, 64);
    const f16Cache = transformer.createCache(1, 64, "f16");
    const expected = transformer.forward(batch, f32Cache).slice();
    const actual = transformer.forward(batch, f16Cache).slice();
    const vocab = transformer.config.vocabSize;
    let worst = 0;
    for (let row = 0; row < prompt.length; row++) {
      const expectedRow = expected.subarray(row * vocab, (row + 1) * vocab);
      const actualRow = actual.subarray(row * vocab, (row + 1) * vocab);
      const spread = Math.max(...expectedRow) - Math.min(...expectedRow);
      for (let i = 0; i < vocab; i++) worst = Math.max(worst, Math.abs(actualRow[i]! - expectedRow[i]!) / spread);
    }
    t.diagnostic(`largest logit difference: ${worst.toExponential(2)} of the row's spread`);
    assert.ok(worst > 0, "the f16 cache should round something");
    assert.ok(worst <= LOGIT_TOLERANCE, `largest logit difference ${worst} of the spread`);
    f32Cache.dispose();
    f16Cache.dispose();
  });

  it("greedy 200 tokens from BOS still equal llama2.c's published text", async () => {
    const cache = transformer.createCache(1, 256, "f16");
    const ids = greedy(transformer, cache, [1], 200);
    const text = decodeWithGgufVocab(vocab, ids).replace(/^ /, "");
    const expected = (await readFile(join(SHARED_MODELS, "stories260K", "expected-greedy-200.txt"), "utf8")).replace(/\n$/, "");
    assert.equal(text, expected);
    cache.dispose();
  });
});

describe("kvType through loadModel", { skip }, () => {
  it("f16: inspectAttention gives float32 keys, the f32 model's rounded to f16", async () => {
    await using f32 = await loadModel(MODEL, { backend: "wasm", contextLength: 32, threads: 1 });
    await using f16 = await loadModel(MODEL, { backend: "wasm", contextLength: 32, threads: 1, kvType: "F16" });
    assert.ok(isAttentionInspector(f32) && isAttentionInspector(f16));
    const expected = await f32.inspectAttention("Once upon a time");
    const actual = await f16.inspectAttention("Once upon a time");
    assert.equal(actual.seqLen, expected.seqLen);
    for (let layer = 0; layer < expected.numLayers; layer++) {
      for (let head = 0; head < expected.numKVHeads; head++) {
        const keys = actual.keys[layer]![head]!;
        assert.ok(keys instanceof Float32Array);
        if (layer === 0) {
          // Layer 0's keys come from the same float32 arithmetic either way: exactly the rounding.
          assert.deepEqual(keys, Float32Array.from(expected.keys[layer]![head]!, (value) => f16ToF32(f32ToF16(value))));
        }
      }
    }
  });

  it("q8_0 is refused as UNSUPPORTED, naming kvType", async () => {
    await assert.rejects(loadModel(MODEL, { backend: "wasm", kvType: "q8_0" }), (error: unknown) => {
      assert.ok(isInferenceError(error, "UNSUPPORTED"), String(error));
      assert.match((error as Error).message, /kvType q8_0/);
      return true;
    });
  });
});
