import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { capabilityMismatches, isInferenceError, loadModel } from "@infer/core";
import { GgmlType, GgufValueType, type GgufValueInput } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import { llamaCppBackend } from "../src/index.js";
import type { LlamaCppModel } from "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

/**
 * LoRA and speculative decoding, checked against independent references: an
 * adapter must act exactly like its update merged into the weights (a second
 * model file written here), and a draft model must not change greedy output.
 * Random models come from @infer/wasm's testing module, loaded from its build
 * output (a test-only link; this package does not depend on it).
 */
const WASM_TESTING = new URL("../../../wasm/dist/src/testing/index.js", import.meta.url);
const skipWithoutWasm = existsSync(fileURLToPath(WASM_TESTING))
  ? false
  : `needs @infer/wasm's random models under ${fileURLToPath(new URL("../../../wasm/dist/src/", import.meta.url))} (build packages/wasm first)`;

const RANK = 4;
const ALPHA = 8;
const GREEDY = { temperature: 0, maxTokens: 60 } as const;

/** Deterministic pseudo-random values in [-amplitude, amplitude). */
function noise(count: number, seed: number, amplitude: number): Float32Array {
  const out = new Float32Array(count);
  let state = seed >>> 0;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = (state / 2 ** 32 - 0.5) * 2 * amplitude;
  }
  return out;
}

describe("LoRA adapters and speculative decoding", { skip: skipWithoutStories || skipWithoutWasm }, () => {
  let dir: string;
  let base: LlamaCppModel;
  let adapted: LlamaCppModel;
  let merged: LlamaCppModel;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-llama-cpp-lora-"));
    const file = await readFile(STORIES_GGUF);
    const source = await readGguf(STORIES_GGUF);
    const weights = new Map(
      source.tensors.map((t) => {
        assert.equal(t.type, GgmlType.F32, "stories260K stores every tensor as F32");
        return [t.name, new Float32Array(file.buffer.slice(file.byteOffset + t.offset, file.byteOffset + t.offset + t.byteLength))];
      }),
    );

    // LoRA on every layer's attn_q and ffn_up. ggml shapes: W [in, out] (row o holds
    // output o's weights), A [in, r], B [r, out]; y += (alpha / r) * B (A x).
    const targets = source.tensors.filter((t) => /^blk\.\d+\.(attn_q|ffn_up)\.weight$/.test(t.name));
    const adapterTensors = [];
    const mergedWeights = new Map(weights);
    for (const [index, target] of targets.entries()) {
      const [inDim, outDim] = target.shape as [number, number];
      const a = noise(inDim * RANK, 100 + index, 0.5);
      const b = noise(RANK * outDim, 200 + index, 0.5);
      const stem = target.name.replace(/\.weight$/, "");
      adapterTensors.push(
        { name: `${stem}.weight.lora_a`, shape: [inDim, RANK], type: GgmlType.F32, data: a },
        { name: `${stem}.weight.lora_b`, shape: [RANK, outDim], type: GgmlType.F32, data: b },
      );
      const w = Float32Array.from(weights.get(target.name)!);
      for (let o = 0; o < outDim; o++) {
        for (let i = 0; i < inDim; i++) {
          let delta = 0;
          for (let j = 0; j < RANK; j++) delta += b[o * RANK + j]! * a[j * inDim + i]!;
          w[o * inDim + i]! += (ALPHA / RANK) * delta;
        }
      }
      mergedWeights.set(target.name, w);
    }
    const adapterMetadata: Record<string, GgufValueInput> = {
      "general.architecture": "llama",
      "general.type": "adapter",
      "adapter.type": "lora",
      "adapter.lora.alpha": { type: GgufValueType.FLOAT32, value: ALPHA },
    };
    await writeGgufFile(join(dir, "adapter.gguf"), { metadata: adapterMetadata, tensors: adapterTensors });
    // The same adapter with alpha stored as an integer: llama.cpp would abort the process reading it.
    await writeGgufFile(join(dir, "int-alpha.gguf"), {
      metadata: { ...adapterMetadata, "adapter.lora.alpha": ALPHA },
      tensors: adapterTensors,
    });
    await writeGgufFile(join(dir, "merged.gguf"), {
      metadata: source.metadata,
      tensors: source.tensors.map((t) => ({ name: t.name, shape: t.shape, type: GgmlType.F32, data: mergedWeights.get(t.name)! })),
    });

    base = (await loadModel(STORIES_GGUF, TEST_LOAD)) as LlamaCppModel;
    adapted = (await loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: join(dir, "adapter.gguf") })) as LlamaCppModel;
    merged = (await loadModel(join(dir, "merged.gguf"), TEST_LOAD)) as LlamaCppModel;
  });
  after(async () => {
    await Promise.all([base?.close(), adapted?.close(), merged?.close()]);
  });

  test("models loaded with an adapter, and without, report the backend's capabilities", () => {
    for (const model of [base, adapted, merged]) assert.deepEqual(capabilityMismatches(llamaCppBackend, model), []);
  });

  test("a GGUF LoRA adapter acts like its update merged into the weights", async () => {
    const prompts = ["Once upon a time", "The dog", "Lily was"];
    const [withAdapter, withMerged, without] = await Promise.all(
      [adapted, merged, base].map((m) => m.classify(prompts, { logits: true })),
    );
    for (let p = 0; p < prompts.length; p++) {
      const a = withAdapter![p]!.logits!;
      const m = withMerged![p]!.logits!;
      const b = without![p]!.logits!;
      let adapterVsMerged = 0;
      let adapterVsBase = 0;
      for (let i = 0; i < a.length; i++) {
        adapterVsMerged = Math.max(adapterVsMerged, Math.abs(a[i]! - m[i]!));
        adapterVsBase = Math.max(adapterVsBase, Math.abs(a[i]! - b[i]!));
      }
      // float32 rounding differs (B(Ax) vs a merged W); the adapter's own effect is hundreds of times larger.
      assert.ok(adapterVsMerged < 5e-3, `prompt ${p}: adapter and merged logits differ by ${adapterVsMerged}`);
      assert.ok(adapterVsBase > 1, `prompt ${p}: the adapter changed logits by only ${adapterVsBase}`);
    }
    const adaptedText = await adapted.generateText("Once upon a time", GREEDY);
    assert.equal(adaptedText.text, (await merged.generateText("Once upon a time", GREEDY)).text);
  });

  test("a draft model with another vocabulary is INVALID_OPTION", async () => {
    const { writeRandomGguf } = (await import(WASM_TESTING.href)) as {
      writeRandomGguf: (path: string, spec: { architecture: string; seed: number }) => Promise<unknown>;
    };
    const other = join(dir, "random-llama.gguf");
    await writeRandomGguf(other, { architecture: "llama", seed: 3 });
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, draftModel: other }), (error: unknown) => {
      assert.ok(isInferenceError(error, "INVALID_OPTION"), String(error));
      assert.ok(error.message.includes(other) && error.message.includes("vocabulary"), error.message);
      return true;
    });
  });

  test("a model whose metadata has a wrongly typed key is MODEL_FORMAT naming file and key", async () => {
    const file = await readFile(STORIES_GGUF);
    const source = await readGguf(STORIES_GGUF);
    const metadata = new Map(source.metadata);
    const tokenTypes = metadata.get("tokenizer.ggml.token_type") as { value: Int32Array };
    // token types stored as FLOAT32 instead of INT32
    metadata.set("tokenizer.ggml.token_type", { type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value: Float32Array.from(tokenTypes.value) });
    const path = join(dir, "float-token-types.gguf");
    await writeGgufFile(path, {
      metadata,
      tensors: source.tensors.map((t) => ({
        name: t.name,
        shape: t.shape,
        type: GgmlType.F32,
        data: new Float32Array(file.buffer.slice(file.byteOffset + t.offset, file.byteOffset + t.offset + t.byteLength)),
      })),
    });
    await assert.rejects(loadModel(path, TEST_LOAD), (error: unknown) => {
      assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
      assert.ok(error.message.includes(path) && error.message.includes("tokenizer.ggml.token_type"), error.message);
      return true;
    });
  });

  test("a q8_0 KV cache runs a model with 32-wide heads and stays close to f16", async () => {
    const { writeRandomGguf } = (await import(WASM_TESTING.href)) as {
      writeRandomGguf: (path: string, spec: { architecture: string; seed: number; headDim: number }) => Promise<unknown>;
    };
    const path = join(dir, "random-llama-head32.gguf");
    await writeRandomGguf(path, { architecture: "llama", seed: 5, headDim: 32 });
    const [f16, q8] = await Promise.all(
      ["f16", "q8_0"].map((kvType) => loadModel(path, { ...TEST_LOAD, contextLength: 128, parallelSlots: 1, kvType })),
    );
    try {
      const [a] = await f16!.classify(["hello world"], { logits: true });
      const [b] = await q8!.classify(["hello world"], { logits: true });
      let diff = 0;
      let scale = 0;
      for (let i = 0; i < a!.logits!.length; i++) {
        diff = Math.max(diff, Math.abs(a!.logits![i]! - b!.logits![i]!));
        scale = Math.max(scale, Math.abs(a!.logits![i]!));
      }
      assert.ok(diff < 0.05 * scale, `q8_0 KV logits differ by ${diff} (largest logit ${scale})`);
    } finally {
      await Promise.all([f16!.close(), q8!.close()]);
    }
  });

  test("an adapter whose metadata would crash llama.cpp is MODEL_FORMAT instead", async () => {
    const path = join(dir, "int-alpha.gguf");
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: path }), (error: unknown) => {
      assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
      assert.ok(error.message.includes(path) && error.message.includes("adapter.lora.alpha"), error.message);
      return true;
    });
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: STORIES_GGUF }), (error: unknown) =>
      isInferenceError(error, "MODEL_FORMAT"),
    );
  });

  test("a draft model speeds nothing up wrongly: speculative greedy output equals plain greedy", async () => {
    const speculative = (await loadModel(STORIES_GGUF, { ...TEST_LOAD, draftModel: STORIES_GGUF })) as LlamaCppModel;
    try {
      for (const prompt of ["", "Once upon a time", "The dog"]) {
        const plain = await base.generateText(prompt, GREEDY);
        const drafted = await speculative.generateText(prompt, GREEDY);
        assert.deepEqual(
          drafted.tokens.map((t) => t.id),
          plain.tokens.map((t) => t.id),
          `prompt ${JSON.stringify(prompt)}`,
        );
      }
      // The draft is the model itself, so its guesses are confirmed: it really ran.
      assert.ok(speculative.speculativeStats.validated > 0, JSON.stringify(speculative.speculativeStats));
      const batch = await speculative.batchGenerate(["Once upon a time", "The dog"], GREEDY);
      assert.equal(batch[0]!.text, (await base.generateText("Once upon a time", GREEDY)).text);
      assert.equal(batch[1]!.text, (await base.generateText("The dog", GREEDY)).text);
      assert.deepEqual(capabilityMismatches(llamaCppBackend, speculative), []);
    } finally {
      await speculative.close();
    }
  });
});
