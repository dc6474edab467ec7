import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { createService, loadModel, type ServiceEntry } from "@infer/core";
import "../../src/index.js";

const gguf = fileURLToPath(new URL("../../../../../../shared/models/stories260K/stories260K.gguf", import.meta.url));
const skip = existsSync(gguf) ? undefined : `needs ${gguf} (the shared test models are absent in this checkout)`;
const options = { backend: "wasm", threads: 1, parallelSlots: 1 } as const;
const greedy = { maxTokens: 8, temperature: 0 };

test("a service over real wasm models: one load for concurrent callers, LRU unload under a budget, in-use kept", { skip }, async () => {
  const loads: string[] = [];
  const counted = (name: string): ServiceEntry => ({ load: () => (loads.push(name), loadModel(gguf, options)) });
  const measure = createService({ models: { one: { source: gguf, options } } });
  const expected = await measure.use("one", async (model) => (await model.generateText("Once upon a time", greedy)).text);
  const bytes = measure.status()[0]!.bytes;
  await measure.close();
  assert.ok(bytes > 0, "the wasm model's size is known once loaded");

  // Room for one model and a half: a second one pushes out the idle first.
  const service = createService({ models: { a: counted("a"), b: counted("b") }, maxLoadedBytes: Math.floor(bytes * 1.5) });
  const texts = await Promise.all([1, 2, 3].map(() => service.use("a", async (model) => (await model.generateText("Once upon a time", greedy)).text)));
  assert.deepEqual(loads, ["a"], "three concurrent first calls, one load");
  assert.deepEqual(texts, [expected, expected, expected]);

  await service.use("b", async () => undefined);
  const state = () => Object.fromEntries(service.status().map((s) => [s.name, s.state]));
  assert.deepEqual(state(), { a: "unloaded", b: "loaded" });

  // b held while a loads: b stays (over budget) and still generates; a release brings the total back under.
  const held = await service.acquire("b");
  const again = await service.use("a", async (model) => (await model.generateText("Once upon a time", greedy)).text);
  assert.equal(again, expected);
  assert.deepEqual(state(), { a: "loaded", b: "loaded" });
  assert.equal((await held.model.generateText("Once upon a time", greedy)).text, expected);
  held.release();
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(service.status().reduce((sum, s) => sum + s.bytes, 0) <= bytes * 1.5);
  assert.deepEqual(loads, ["a", "b", "a"]);
  await service.close();
});
