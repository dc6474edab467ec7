import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { capabilitiesOf, isKVSnapshotModel, loadModel, type LoadOptions } from "@infer/core";
import { assertChatPrefixReuse, assertCode, assertKVSnapshotResumes } from "@infer/core/testing";
import "../../src/index.js";

const gguf = fileURLToPath(new URL("../../../../../../shared/models/stories260K/stories260K.gguf", import.meta.url));
const skip = existsSync(gguf) ? undefined : `needs ${gguf} (the shared test models are absent in this checkout)`;
const load = (options: LoadOptions = {}) => loadModel(gguf, { backend: "wasm", threads: 1, contextLength: 256, ...options });

test("wasm: later chat turns reuse the cached prefix, with the same greedy tokens as without", { skip }, async () => {
  await using reusing = await load();
  await using plain = await load({ promptCacheBytes: 0 });
  await assertChatPrefixReuse(reusing, plain);
});

test("wasm: a prefix displaced from its slot is taken back from the prompt cache", { skip }, async () => {
  await using model = await load({ parallelSlots: 1 });
  const story = "Once upon a time there was a little girl named Lily who liked to play in the park.";
  await model.generateText(story, { temperature: 0, maxTokens: 4 });
  await model.generateText("Tom had a big red ball and a dog.", { temperature: 0, maxTokens: 4 });
  await model.generateText(`${story} One day`, { temperature: 0, maxTokens: 4 });
  const { cachedPromptTokens, promptTokens } = model.metrics();
  assert.ok(cachedPromptTokens > promptTokens / 2, `${cachedPromptTokens} of ${promptTokens} reused`);
});

for (const kvType of ["f32", "q8_0"] as const) {
  test(`wasm: a KV snapshot (${kvType}) resumes a chat with identical greedy tokens`, { skip }, async () => {
    await using model = await load({ kvType });
    await using fresh = await load({ kvType });
    assert.equal(capabilitiesOf(model)["kv.snapshot"], "supported");
    await assertKVSnapshotResumes(model, fresh);
  });
}

test("wasm: restoreKV refuses another model's snapshot and damaged bytes", { skip }, async () => {
  await using model = await load();
  await using other = await load({ kvType: "f16" });
  assert.ok(isKVSnapshotModel(model) && isKVSnapshotModel(other));
  await model.generateText("Once upon a time", { temperature: 0, maxTokens: 8 });
  const snapshot = await model.snapshotKV();
  await assertCode(other.restoreKV(snapshot), "INVALID_OPTION");
  await assertCode(model.restoreKV(snapshot.subarray(0, snapshot.length - 3)), "MODEL_FORMAT");
  await assertCode(model.restoreKV(new TextEncoder().encode("not a snapshot at all")), "MODEL_FORMAT");
  const corrupt = snapshot.slice();
  corrupt[13] = 0xff; // inside the JSON header
  await assertCode(model.restoreKV(corrupt), "MODEL_FORMAT");
  await assertCode(model.restoreKV("bytes" as unknown as Uint8Array), "INVALID_OPTION");
  // The model is still fine, and its own snapshot still loads.
  await model.restoreKV(snapshot);
  assert.ok((await model.generateText("Once upon a time", { temperature: 0, maxTokens: 4 })).tokens.length > 0);
});

test("wasm: promptCacheBytes is validated", async () => {
  await assertCode(loadModel("nowhere.gguf", { backend: "wasm", promptCacheBytes: -1 }), "INVALID_OPTION");
});
