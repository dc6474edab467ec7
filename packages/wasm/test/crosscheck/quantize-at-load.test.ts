/**
 * LoadOptions.quantize: float weight matrices re-encoded once at load. Against
 * independent references: a float GGUF quantized at load equals the file our
 * writer quantized ahead of time (the same ggml encoder on the same floats, so
 * identical logits); a safetensors folder quantized at load stays close to its
 * float logits; stories260K quantized at load writes llama.cpp's text on a
 * Q8_0 file of the same weights.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import { GgmlType, dequantize, quantize } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import "../../src/index.js";
import type { Transformer } from "../../src/engine/transformer.js";
import { loadTransformer } from "../../src/load/load.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { writeRandomGguf, writeRandomHf } from "../../src/testing/index.js";
import { assertGreedyAgrees, toleranceFor } from "./compare.js";
import { closeLlama, LlamaOracle, openLlama } from "./llama-oracle.js";
import { argmax, SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";

const PROMPT = [5, 77, 261, 32, 104, 101, 108, 108, 111, 258, 44, 200, 3, 99];

/** Logits of every prompt position, [PROMPT.length, vocab]. */
function prefill(transformer: Transformer): Float32Array {
  const n = PROMPT.length;
  return transformer.forward(
    {
      tokens: Int32Array.from(PROMPT),
      positions: Int32Array.from(PROMPT, (_, i) => i),
      seqIds: new Int32Array(n),
      logitRows: Int32Array.from(PROMPT, (_, i) => i),
    },
    transformer.createCache(1, 32),
  );
}

async function withFolder<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "infer-quantize-"));
  try {
    return await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(aa * bb);
}

for (const [name, type] of [
  ["Q8_0", GgmlType.Q8_0],
  ["Q4_0", GgmlType.Q4_0],
] as const) {
  test(`an F32 GGUF quantized to ${name} at load gives exactly the logits of the ${name} file`, async () => {
    await withFolder(async (dir) => {
      const spec = { architecture: "qwen2" as const, seed: 21 };
      await writeRandomGguf(join(dir, "f32.gguf"), spec);
      await writeRandomGguf(join(dir, "stored.gguf"), { ...spec, type });
      const atLoad = await loadTransformer(join(dir, "f32.gguf"), { quantize: type });
      const stored = await loadTransformer(join(dir, "stored.gguf"));
      assert.deepEqual(prefill(atLoad.transformer), prefill(stored.transformer));
      assert.equal(atLoad.quantBits, stored.quantBits);
      assert.equal(atLoad.transformer.weightBytes, stored.transformer.weightBytes, "weights counted as held, not as stored");
    });
  });
}

test("an F16 safetensors folder quantized to Q8_0 at load stays close to its float logits, in the kernels' memory", async () => {
  await withFolder(async (dir) => {
    await writeRandomHf(join(dir, "hf"), { architecture: "llama", seed: 5, dtype: "F16", hiddenSize: 128, ffnSize: 256 });
    const kernels = await createWasmKernels({ threads: 2 });
    try {
      const float = await loadTransformer(join(dir, "hf"), { kernels });
      const q8 = await loadTransformer(join(dir, "hf"), { kernels, quantize: GgmlType.Q8_0 });
      assert.equal(q8.quantBits, 8);
      assert.ok(q8.transformer.weightBytes < float.transformer.weightBytes * 0.6, "Q8_0 holds about half of F16's bytes");
      const a = prefill(float.transformer);
      const b = prefill(q8.transformer);
      const vocab = float.transformer.config.vocabSize;
      for (let row = 0; row < PROMPT.length; row++) {
        const fa = a.subarray(row * vocab, (row + 1) * vocab);
        const fb = b.subarray(row * vocab, (row + 1) * vocab);
        assert.ok(cosine(fa, fb) > 0.999, `row ${row}: cosine ${cosine(fa, fb)}`);
      }
      // Random logits are flat, so only most top choices need survive 8-bit weights.
      let same = 0;
      for (let row = 0; row < PROMPT.length; row++) same += argmax(a, row * vocab, vocab) === argmax(b, row * vocab, vocab) ? 1 : 0;
      assert.ok(same >= PROMPT.length - 2, `${same} of ${PROMPT.length} top tokens agree`);
      float.transformer.releaseMemory();
      q8.transformer.releaseMemory();
    } finally {
      await kernels.dispose?.();
    }
  });
});

const skip = skipWithoutSharedModels();

/**
 * The independent reference for Q8_0 text is llama.cpp on a Q8_0 file of the
 * same weights (quantized by our encoder, which writes ggml's reference bytes):
 * both then hold identical weights and quantize activations to 8 bits.
 */
test("stories260K quantized to Q8_0 at load writes llama.cpp's greedy text on the Q8_0 file up to a near-tie", { skip }, async (t) => {
  const llama = await openLlama();
  if (typeof llama === "string") return t.skip(llama);
  const source = join(SHARED_MODELS, "stories260K", "stories260K.gguf");
  await withFolder(async (dir) => {
    const copy = join(dir, "stories260K-q8_0.gguf");
    await writeQ8Copy(source, copy);
    const steps = 200;
    await using model = await loadModel(source, { backend: "wasm", quantize: "q8_0", contextLength: 256 });
    assert.equal(model.info().quantBits, 8);
    const ours = (await model.generateText("", { maxTokens: steps, temperature: 0, ignoreEos: true })).tokens.map((token) => token.id);
    const oracle = await LlamaOracle.open(llama, copy, 256);
    if (typeof oracle === "string") return t.skip(oracle);
    try {
      const theirs = await oracle.greedy(oracle.tokenize(""), steps);
      const agreed = assertGreedyAgrees(ours, theirs, toleranceFor(GgmlType.Q8_0, "llama"), "stories260K Q8_0");
      t.diagnostic(`greedy tokens identical for ${agreed} of ${steps} steps`);
      // The texts part only at a near-tie for llama.cpp (checked above): its 8-bit activation
      // blocks round differently from ours. 135 steps agree today; a lost prefix means a real change.
      assert.ok(agreed >= 100, `only ${agreed} greedy steps agree`);
    } finally {
      await oracle.close();
      await closeLlama();
    }
  });
});

/** A copy of a GGUF with every matrix whose rows hold whole 32-blocks re-encoded as Q8_0 (as quantize-at-load does). */
async function writeQ8Copy(source: string, target: string): Promise<void> {
  const file = await readGguf(source);
  const tensors = file.tensors.map((info) => {
    const data = file.tensorData(info);
    const count = info.shape.reduce((product, size) => product * size, 1);
    if (info.shape.length !== 2 || info.type !== GgmlType.F32 || info.shape[0]! % 32 !== 0) {
      return { name: info.name, shape: info.shape, type: info.type, data };
    }
    return { name: info.name, shape: info.shape, type: GgmlType.Q8_0, data: quantize(GgmlType.Q8_0, dequantize(GgmlType.F32, data, count)) };
  });
  await writeGgufFile(target, { metadata: new Map(file.metadata), tensors, alignment: file.alignment });
}

// KV types the backend cannot hold: test/engine/kv-types.test.ts.
test("quantize to a type the backend cannot encode is refused clearly", { skip: skip || !existsSync(SHARED_MODELS) }, async () => {
  const path = join(SHARED_MODELS, "stories260K", "stories260K.gguf");
  await assert.rejects(loadModel(path, { backend: "wasm", quantize: "q3_k" }), (error: unknown) => {
    assert.ok(isInferenceError(error, "INVALID_OPTION"), String(error));
    assert.match((error as Error).message, /quantize/);
    return true;
  });
});
