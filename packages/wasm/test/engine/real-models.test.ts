/**
 * Greedy decoding of the two real tiny models against their published
 * outputs: stories260K (GGUF, interleaved RoPE) and TinyStories-656K
 * (Hugging Face safetensors, rotate_half RoPE, tied embeddings stored once).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { getStringArray } from "@infer/formats";
import { loadTransformer } from "../../src/load/load.js";
import { decodeWithGgufVocab, greedy } from "./greedy.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "./helpers.js";

const skip = skipWithoutSharedModels();

test("stories260K.gguf: greedy 200 tokens from BOS equal llama2.c's published text", { skip }, async () => {
  const folder = join(SHARED_MODELS, "stories260K");
  const { transformer, format, quantBits, quantGroup, metadata } = await loadTransformer(join(folder, "stories260K.gguf"));
  assert.equal(format, "gguf");
  assert.equal(quantBits, 32);
  assert.equal(quantGroup, 0);
  assert.equal(transformer.config.ropeMode, "normal");
  assert.equal(metadata.format, "gguf");
  assert.ok(metadata.format === "gguf");
  const vocab = getStringArray(metadata.gguf.metadata, "tokenizer.ggml.tokens", true).toArray();

  const ids = greedy(transformer, transformer.createCache(1, 256), [1], 200);
  // The first piece carries SentencePiece's leading space, which decoders drop.
  const text = decodeWithGgufVocab(vocab, ids).replace(/^ /, "");
  const expected = (await readFile(join(folder, "expected-greedy-200.txt"), "utf8")).replace(/\n$/, "");
  assert.equal(text, expected);
});

test("tinystories-656k (HF folder): greedy 100 ids after the prompt equal the expected ids", { skip }, async () => {
  const folder = join(SHARED_MODELS, "tinystories-656k");
  const { transformer, format, metadata } = await loadTransformer(folder);
  assert.equal(format, "safetensors");
  assert.equal(metadata.format, "safetensors");
  assert.equal(transformer.config.ropeMode, "neox");
  assert.equal(transformer.config.tiedEmbeddings, true);
  // Tied embeddings count once: 656K parameters as the model's name says.
  assert.equal(transformer.parameterCount, 656_000);
  const expected = JSON.parse(await readFile(join(folder, "expected-greedy-100.json"), "utf8")) as {
    prompt_ids: number[];
    greedy_ids: number[];
  };
  const ids = greedy(transformer, transformer.createCache(1, 128), expected.prompt_ids, 100);
  assert.deepEqual(ids, expected.greedy_ids);
});
