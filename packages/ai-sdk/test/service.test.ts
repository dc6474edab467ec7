import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { generateText, streamText } from "ai";
import { createService, isInferenceError, loadModel } from "@infer/core";
import { createInfer } from "../src/index.js";

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const gguf = `${models}stories260K/stories260K.gguf`;
const skip = existsSync(gguf) ? false : `needs ${gguf} (the shared test models are not here)`;
const expected = () => readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");

async function backends(): Promise<void> {
  for (const name of ["@infer/wasm", "@infer/llama-cpp"]) await import(name).catch(() => undefined);
}

test("models by name load on first use through the provider's service, one load shared by concurrent calls", { skip, timeout: 120_000 }, async () => {
  await backends();
  const loads: string[] = [];
  const counted = (name: string, backend: string) => ({
    load: () => {
      loads.push(name);
      return loadModel(gguf, { backend, threads: 1 });
    },
  });
  const infer = createInfer({ models: { small: counted("small", "wasm"), other: counted("other", "llama_cpp"), byPath: gguf }, load: { threads: 1 } });
  try {
    assert.deepEqual(loads, [], "nothing loads before the first call");
    // stories260K is a base model: "completion" sends the prompt as plain text (BOS + nothing = llama2.c's test).
    const ask = (name: string, maxOutputTokens: number) =>
      generateText({ model: infer(name, { promptMode: "completion" }), prompt: "", maxOutputTokens, temperature: 0, maxRetries: 0 });
    const together = await Promise.all([ask("small", 40), ask("small", 40), ask("small", 40)]);
    assert.deepEqual(loads, ["small"], "three concurrent calls, one load");
    for (const result of together) assert.ok(result.text.length > 40 && expected().startsWith(result.text), result.text);
    const other = await ask("other", 200);
    assert.equal(other.text, expected());
    assert.deepEqual(loads, ["small", "other"]);
    const streamed = streamText({ model: infer("small", { promptMode: "completion" }), prompt: "", maxOutputTokens: 20, temperature: 0 });
    let text = "";
    for await (const delta of streamed.textStream) text += delta;
    assert.ok(expected().startsWith(text) && text.length > 20, text);
    assert.deepEqual(loads, ["small", "other"], "later calls reuse the loaded models");
    // A plain source is resolved like a model id (a path here) and loaded with the provider's load options.
    assert.equal((await ask("byPath", 200)).text, expected());
  } finally {
    await infer.close();
  }
});

test("a name the service does not know fails with its MODEL_NOT_FOUND, before any load", { skip, timeout: 60_000 }, async () => {
  await backends();
  const infer = createInfer({ models: { small: gguf }, load: { threads: 1 } });
  try {
    const error = await generateText({ model: infer("smal"), prompt: "x", maxRetries: 0 }).catch((e: unknown) => e);
    assert.ok(isInferenceError(error, "MODEL_NOT_FOUND"), String(error));
    assert.match((error as Error).message, /no model named 'smal'.*known: small/);
    // A path is a service name too here: models outside the service would escape its memory budget.
    const byPath = await generateText({ model: infer(gguf), prompt: "x", maxRetries: 0 }).catch((e: unknown) => e);
    assert.ok(isInferenceError(byPath, "MODEL_NOT_FOUND"), String(byPath));
  } finally {
    await infer.close();
  }
});

test("a given service: each call holds its model, the service unloads it when idle, the provider leaves the service open", { skip, timeout: 120_000 }, async () => {
  await backends();
  const service = createService({ models: { small: { source: gguf, options: { backend: "wasm", threads: 1 } } }, idleUnloadMs: 50 });
  const infer = createInfer({ service });
  const state = () => service.status()[0]!;
  try {
    const streamed = streamText({ model: infer("small", { promptMode: "completion" }), prompt: "", maxOutputTokens: 30, temperature: 0 });
    let text = "";
    for await (const delta of streamed.textStream) {
      if (!text) assert.equal(state().inUse, 1, "held while streaming");
      text += delta;
    }
    assert.ok(expected().startsWith(text) && text.length > 30, text);
    assert.equal(state().inUse, 0, "released when the stream ends");
    for (let waited = 0; state().state !== "unloaded" && waited < 5000; waited += 25) await new Promise((r) => setTimeout(r, 25));
    assert.equal(state().state, "unloaded", "idle unload after the call");
    const again = await generateText({ model: infer("small", { promptMode: "completion" }), prompt: "", maxOutputTokens: 30, temperature: 0 });
    assert.equal(again.text, text, "loaded again on the next call, same greedy text");
    await infer.close();
    assert.notEqual(state().state, "unloaded", "the provider does not close a service it was given");
  } finally {
    await service.close();
  }
});

test("models to load and a service together are refused", () => {
  const service = createService({ models: { a: "./a.gguf" } });
  assert.throws(() => createInfer({ service, models: { b: "./b.gguf" } }), (e: unknown) => isInferenceError(e, "INVALID_OPTION"));
});
