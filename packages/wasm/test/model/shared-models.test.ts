/**
 * The engine end to end on the two small real models: published greedy
 * outputs reproduced exactly through the public contract, and the backend
 * conformance suite on each.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import "@infer/core/node";
import { runConformanceSuite } from "@infer/core/testing";
import { wasmBackend } from "../../src/index.js";

const shared = fileURLToPath(new URL("../../../../../../shared/models/", import.meta.url));
const skip = existsSync(shared) ? undefined : `shared models not found at ${shared} (a clone outside this workplace has none)`;
const storiesGguf = `${shared}stories260K/stories260K.gguf`;
const tinyStories = `${shared}tinystories-656k`;

test("stories260K.gguf: greedy 200 tokens from BOS equal llama2.c's published output", { skip }, async () => {
  const expected = readFileSync(`${shared}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");
  await using model = await loadModel(storiesGguf, { backend: "wasm" });
  let streamed = "";
  const ids: number[] = [];
  for await (const token of model.generate("", { maxTokens: 200, temperature: 0 })) {
    streamed += token.text;
    ids.push(token.id);
  }
  assert.equal(ids.length, 200);
  assert.equal(streamed, expected);
  const metrics = model.metrics();
  assert.equal(metrics.promptTokens, 1);
  assert.equal(metrics.generatedTokens, 200);
});

test("TinyStories-656K (safetensors): prompt ids and greedy 100 ids equal the published ones", { skip }, async () => {
  const expected = JSON.parse(readFileSync(`${tinyStories}/expected-greedy-100.json`, "utf8")) as {
    prompt: string;
    prompt_ids: number[];
    greedy_ids: number[];
  };
  await using model = await loadModel(tinyStories);
  assert.equal(model.backend, "wasm");
  const tokenizer = model as unknown as { encode(text: string): number[]; decode(ids: number[]): string };
  assert.deepEqual(tokenizer.encode(expected.prompt), expected.prompt_ids);
  const result = await model.generateText(expected.prompt, { maxTokens: 100, temperature: 0 });
  assert.deepEqual(
    result.tokens.map((t) => t.id),
    expected.greedy_ids,
  );
  assert.equal(result.text, tokenizer.decode(expected.greedy_ids));
  assert.equal(result.finishReason, "length");
  const info = model.info();
  assert.equal(info.format, "safetensors");
  assert.equal(info.vocabSize, 2048);
  assert.equal(info.numLayers, 2);
  assert.equal(info.hiddenSize, 128);
});

// Neither model ships a chat template, so the chat check renders a plain one.
const chat = {
  chatMessages: [{ role: "user" as const, content: "Tell me a story." }],
  chatTemplate: "{% for m in messages %}{{ m.content }}\n{% endfor %}",
};
runConformanceSuite({ name: "wasm stories260K.gguf", skip, ...chat, backend: wasmBackend, load: () => loadModel(storiesGguf, { backend: "wasm" }) });
runConformanceSuite({ name: "wasm TinyStories-656K", skip, ...chat, backend: wasmBackend, load: () => loadModel(tinyStories, { backend: "wasm" }) });
