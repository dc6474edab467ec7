/** Bad models and bad batches fail with InferenceError codes that name the file, field or tensor. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isInferenceError, type ErrorCode } from "@infer/core";
import { type GgufTensorSpec, GgufValueType, type GgufValue } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import { loadTransformer } from "../../src/load/load.js";
import { writeRandomGguf, writeRandomHf } from "../../src/testing/index.js";

async function withFolder(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "infer-errors-"));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function rejectsWith(code: ErrorCode, ...mentions: string[]) {
  return (error: unknown) => {
    assert.ok(isInferenceError(error, code), `expected ${code}, got ${String(error)}`);
    for (const text of mentions) assert.ok(error.message.includes(text), `"${error.message}" should mention "${text}"`);
    return true;
  };
}

/** Rewrites a GGUF file through `edit`, which may change its metadata and tensors. */
async function rewriteGguf(
  from: string,
  to: string,
  edit: (metadata: Map<string, GgufValue>, tensors: GgufTensorSpec[]) => void,
): Promise<void> {
  const gguf = await readGguf(from);
  const metadata = new Map(gguf.metadata);
  const tensors = gguf.tensors.map((info) => ({ name: info.name, shape: info.shape, type: info.type, data: gguf.tensorData(info) }));
  edit(metadata, tensors);
  await writeGgufFile(to, { metadata, tensors });
}

async function editConfig(folder: string, edit: (config: Record<string, unknown>) => void): Promise<void> {
  const path = join(folder, "config.json");
  const config = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  edit(config);
  await writeFile(path, JSON.stringify(config));
}

test("an unknown architecture fails with UNSUPPORTED_ARCHITECTURE naming it and the supported ones", async () => {
  await withFolder(async (dir) => {
    await writeRandomGguf(join(dir, "llama.gguf"), { architecture: "llama", seed: 1 });
    await rewriteGguf(join(dir, "llama.gguf"), join(dir, "mamba.gguf"), (metadata) => {
      metadata.set("general.architecture", { type: GgufValueType.STRING, value: "mamba" });
    });
    await assert.rejects(
      loadTransformer(join(dir, "mamba.gguf")),
      rejectsWith("UNSUPPORTED_ARCHITECTURE", "mamba", "llama, qwen2, qwen3, gemma3, phi3"),
    );
    await writeRandomHf(join(dir, "hf"), { architecture: "llama", seed: 1 });
    await editConfig(join(dir, "hf"), (config) => {
      config.model_type = "gpt_neox";
      config.architectures = ["GPTNeoXForCausalLM"];
    });
    await assert.rejects(loadTransformer(join(dir, "hf")), rejectsWith("UNSUPPORTED_ARCHITECTURE", "gpt_neox", "config.json"));
  });
});

test("one part of a split GGUF is UNSUPPORTED naming the file and split.count", async () => {
  await withFolder(async (dir) => {
    await writeRandomGguf(join(dir, "whole.gguf"), { architecture: "llama", seed: 3 });
    await rewriteGguf(join(dir, "whole.gguf"), join(dir, "model-00001-of-00002.gguf"), (metadata) => {
      metadata.set("split.no", { type: GgufValueType.UINT16, value: 0 });
      metadata.set("split.count", { type: GgufValueType.UINT16, value: 2 });
      metadata.set("split.tensors.count", { type: GgufValueType.INT32, value: 3 });
    });
    await assert.rejects(
      loadTransformer(join(dir, "model-00001-of-00002.gguf")),
      rejectsWith("UNSUPPORTED", "model-00001-of-00002.gguf", "split.count = 2", "llama_cpp"),
    );
    // split.count = 1 (a split tool's single part) is a whole model.
    await rewriteGguf(join(dir, "whole.gguf"), join(dir, "single.gguf"), (metadata) => {
      metadata.set("split.count", { type: GgufValueType.UINT16, value: 1 });
    });
    await loadTransformer(join(dir, "single.gguf"));
  });
});

test("a missing or corrupt config field fails with MODEL_FORMAT naming the file and the field", async () => {
  await withFolder(async (dir) => {
    await writeRandomHf(join(dir, "hf"), { architecture: "qwen2", seed: 2 });
    await editConfig(join(dir, "hf"), (config) => delete config.num_hidden_layers);
    await assert.rejects(loadTransformer(join(dir, "hf")), rejectsWith("MODEL_FORMAT", "config.json", "num_hidden_layers"));
    // A corrupt count is refused before anything is sized from it.
    await editConfig(join(dir, "hf"), (config) => (config.num_hidden_layers = 1e9));
    await assert.rejects(loadTransformer(join(dir, "hf")), rejectsWith("MODEL_FORMAT", "num_hidden_layers", "at most"));
    await editConfig(join(dir, "hf"), (config) => (config.num_hidden_layers = "two"));
    await assert.rejects(loadTransformer(join(dir, "hf")), rejectsWith("MODEL_FORMAT", "num_hidden_layers", "number"));

    await writeRandomGguf(join(dir, "ok.gguf"), { architecture: "qwen3", seed: 2 });
    await rewriteGguf(join(dir, "ok.gguf"), join(dir, "bad.gguf"), (metadata) => metadata.delete("qwen3.embedding_length"));
    await assert.rejects(loadTransformer(join(dir, "bad.gguf")), rejectsWith("MODEL_FORMAT", "bad.gguf", "qwen3.embedding_length"));
  });
});

test("a tensor of the wrong shape, a missing tensor, or an untied model without lm_head fails with MODEL_FORMAT naming it", async () => {
  await withFolder(async (dir) => {
    await writeRandomGguf(join(dir, "ok.gguf"), { architecture: "llama", seed: 3 });
    await rewriteGguf(join(dir, "ok.gguf"), join(dir, "shape.gguf"), (_, tensors) => {
      const q = tensors.find((t) => t.name === "blk.0.attn_q.weight")!;
      const k = tensors.find((t) => t.name === "blk.0.attn_k.weight")!;
      k.shape = q.shape;
      k.data = q.data;
    });
    await assert.rejects(loadTransformer(join(dir, "shape.gguf")), rejectsWith("MODEL_FORMAT", "blk.0.attn_k.weight", "[64, 64]", "[32, 64]"));
    await rewriteGguf(join(dir, "ok.gguf"), join(dir, "missing.gguf"), (_, tensors) => {
      tensors.splice(tensors.findIndex((t) => t.name === "blk.1.ffn_down.weight"), 1);
    });
    await assert.rejects(loadTransformer(join(dir, "missing.gguf")), rejectsWith("MODEL_FORMAT", "blk.1.ffn_down.weight", "missing"));

    await writeRandomHf(join(dir, "hf"), { architecture: "phi3", seed: 3 });
    await editConfig(join(dir, "hf"), (config) => (config.intermediate_size = 96));
    await assert.rejects(loadTransformer(join(dir, "hf")), rejectsWith("MODEL_FORMAT", "model.layers.0.mlp.gate_up_proj.weight"));

    // tie_word_embeddings false and no lm_head.weight.
    await writeRandomHf(join(dir, "tied"), { architecture: "llama", seed: 3, tiedEmbeddings: true });
    await editConfig(join(dir, "tied"), (config) => (config.tie_word_embeddings = false));
    await assert.rejects(loadTransformer(join(dir, "tied")), rejectsWith("MODEL_FORMAT", "lm_head.weight"));
  });
});

test("missing paths, unsupported RoPE scaling and bad batches fail with their own codes", async () => {
  await withFolder(async (dir) => {
    await assert.rejects(loadTransformer(join(dir, "nothing.gguf")), rejectsWith("MODEL_NOT_FOUND", "nothing.gguf"));

    await writeRandomHf(join(dir, "yarn"), { architecture: "qwen2", seed: 4 });
    await editConfig(join(dir, "yarn"), (config) => (config.rope_scaling = { rope_type: "yarn", factor: 4 }));
    await assert.rejects(loadTransformer(join(dir, "yarn")), rejectsWith("UNSUPPORTED", "yarn"));

    await writeRandomGguf(join(dir, "m.gguf"), { architecture: "llama", seed: 4 });
    const { transformer } = await loadTransformer(join(dir, "m.gguf"));
    const cache = transformer.createCache(2, 8);
    const one = (token: number, position: number, seq = 0) => ({
      tokens: Int32Array.of(token),
      positions: Int32Array.of(position),
      seqIds: Int32Array.of(seq),
      logitRows: Int32Array.of(0),
    });
    assert.throws(() => transformer.forward(one(100_000, 0), cache), rejectsWith("INVALID_OPTION", "100000"));
    assert.throws(() => transformer.forward(one(1, 0, 2), cache), rejectsWith("INVALID_OPTION", "sequence 2"));
    assert.throws(() => transformer.forward(one(1, 3), cache), rejectsWith("INVALID_OPTION", "position 3"));
    assert.throws(() => transformer.forward(one(1, 8), cache), rejectsWith("CONTEXT_OVERFLOW", "8"));
    assert.throws(
      () => transformer.forward({ ...one(1, 0), logitRows: Int32Array.of(1) }, cache),
      rejectsWith("INVALID_OPTION", "logit row 1"),
    );
    // None of the failures wrote to the cache.
    assert.equal(cache.length(0), 0);
    assert.throws(() => transformer.createCache(0, 8), rejectsWith("INVALID_OPTION", "numSeqs"));
  });
});
