// A SentencePiece vocabulary without all 256 byte tokens: llama.cpp spells a character outside the
// vocabulary with them, and where one is missing its lookup throws a C++ exception that ended the whole
// process (std::out_of_range, uncaught). Such text is now refused as UNSUPPORTED naming the character, and
// the model keeps working. Before the guard, each `encode` below of a refused character killed this test
// file's process.
import assert from "node:assert/strict";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError, isTokenizerModel, loadModel, type TextModel, type TokenizerModel } from "@infer/core";
import "../src/index.js";
import { skipWithoutStories, skipWithoutTinyStories, STORIES_GGUF, TEST_LOAD, TINYSTORIES } from "./fixtures.js";
import { convertHfLlamaToGguf } from "./hf-llama-to-gguf.js";
import { loadWasmKit, wasmBuildMissing } from "./wasm-link.js";

const refusesCharacter = (character: string) => (error: unknown) => {
  assert.ok(isInferenceError(error, "UNSUPPORTED"), String(error));
  assert.equal(error.details.character, character);
  return true;
};

async function loadTokenizer(path: string, backend: "llama_cpp" | "wasm"): Promise<TextModel & TokenizerModel> {
  const model = await loadModel(path, { ...TEST_LOAD, backend, parallelSlots: 1 });
  assert.ok(isTokenizerModel(model));
  return model;
}

describe("tinystories-656k, whose vocabulary has 77 of the 256 byte tokens", { skip: skipWithoutTinyStories || wasmBuildMissing }, () => {
  let llamaCpp: TextModel & TokenizerModel;
  let wasm: TextModel & TokenizerModel;
  before(async () => {
    const path = join(await mkdtemp(join(tmpdir(), "infer-byte-fallback-")), "tinystories-656k.gguf");
    await convertHfLlamaToGguf(await loadWasmKit(), TINYSTORIES, path);
    llamaCpp = await loadTokenizer(path, "llama_cpp");
    wasm = await loadTokenizer(path, "wasm");
  });
  after(async () => {
    await llamaCpp?.close();
    await wasm?.close();
  });

  test("text it can spell encodes as on wasm; a character it cannot is UNSUPPORTED, named", async () => {
    for (const text of ["Once upon a time", "a\nb", "x <|start_story|>Once"]) {
      assert.deepEqual(llamaCpp.encode(text), wasm.encode(text), text);
    }
    // wasm, like the Hugging Face tokenizer, encodes it as the unknown token; llama.cpp would terminate.
    assert.ok(wasm.encode("ж").includes(0));
    assert.throws(() => llamaCpp.encode("ж"), refusesCharacter("ж"));
    assert.throws(() => llamaCpp.encode("Once upon a 🙂"), refusesCharacter("🙂"));
  });

  test("a prompt or chat message holding one fails the call, and the model goes on", async () => {
    await assert.rejects(llamaCpp.generateText("The cat said жжж", { maxTokens: 4, temperature: 0 }), refusesCharacter("ж"));
    const result = await llamaCpp.generateText("Once upon a time", { maxTokens: 8, temperature: 0 });
    assert.equal(result.tokens.length, 8);
  });
});

describe("stories260K with one byte token renamed (<0xF0> -> <0yF0>)", { skip: skipWithoutStories }, () => {
  let model: TextModel & TokenizerModel;
  before(async () => {
    const bytes = await readFile(STORIES_GGUF);
    const at = bytes.indexOf("<0xF0>");
    assert.ok(at > 0);
    bytes.write("<0yF0>", at);
    const path = join(await mkdtemp(join(tmpdir(), "infer-byte-fallback-")), "stories-no-f0.gguf");
    await writeFile(path, bytes);
    model = await loadTokenizer(path, "llama_cpp");
  });
  after(async () => {
    await model?.close();
  });

  test("characters spelled with other bytes encode; a 4-byte one is refused", async () => {
    const reference = await loadTokenizer(STORIES_GGUF, "llama_cpp");
    try {
      for (const text of ["Once upon a time", "café", "жук"]) assert.deepEqual(model.encode(text), reference.encode(text), text);
    } finally {
      await reference.close();
    }
    assert.throws(() => model.encode("ok 🙂"), refusesCharacter("🙂"));
  });
});
