import assert from "node:assert/strict";
import { test } from "node:test";
import { capabilitiesOf, isKVSnapshotModel, loadModel, type LoadOptions } from "@infer/core";
import { assertChatPrefixReuse, assertCode, assertKVSnapshotResumes } from "@infer/core/testing";
import "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

const load = (options: LoadOptions = {}) => loadModel(STORIES_GGUF, { ...TEST_LOAD, contextLength: 256, ...options });

test("llama_cpp: later chat turns reuse the sequence's tokens, with the same greedy tokens as without", { skip: skipWithoutStories }, async () => {
  await using reusing = await load({ parallelSlots: 2 });
  await using plain = await load({ parallelSlots: 2, promptCacheBytes: 0 });
  await assertChatPrefixReuse(reusing, plain);
});

test("llama_cpp: two conversations keep a sequence each", { skip: skipWithoutStories }, async () => {
  await using model = await load({ parallelSlots: 2 });
  const lily = "Once upon a time there was a little girl named Lily who liked to play in the park.";
  const tom = "Tom had a big red ball and a dog named Max who ran very fast.";
  const greedy = { temperature: 0, maxTokens: 4 };
  await model.generateText(lily, greedy);
  await model.generateText(tom, greedy);
  for (const story of [lily, tom]) {
    await model.generateText(`${story} One day`, greedy);
    const { cachedPromptTokens, promptTokens } = model.metrics();
    assert.ok(cachedPromptTokens > promptTokens / 2, `${cachedPromptTokens} of ${promptTokens} reused`);
  }
});

test("llama_cpp: a KV snapshot resumes a chat with identical greedy tokens", { skip: skipWithoutStories }, async () => {
  await using model = await load({ parallelSlots: 2 });
  await using fresh = await load({ parallelSlots: 2 });
  assert.equal(capabilitiesOf(model)["kv.snapshot"], "supported");
  await assertKVSnapshotResumes(model, fresh);
});

test("llama_cpp: restoreKV refuses another model's snapshot and damaged bytes before llama.cpp reads them", { skip: skipWithoutStories }, async () => {
  await using model = await load();
  await using other = await load({ kvType: "f32" });
  assert.ok(isKVSnapshotModel(model) && isKVSnapshotModel(other));
  await model.generateText("Once upon a time", { temperature: 0, maxTokens: 8 });
  const snapshot = await model.snapshotKV();
  await assertCode(other.restoreKV(snapshot), "INVALID_OPTION");
  const flipped = snapshot.slice();
  flipped[flipped.length - 10]! ^= 0xff; // inside llama.cpp's state
  await assertCode(model.restoreKV(flipped), "MODEL_FORMAT");
  await assertCode(model.restoreKV(snapshot.subarray(0, 20)), "MODEL_FORMAT");
  await assertCode(model.restoreKV(new TextEncoder().encode("not a snapshot at all")), "MODEL_FORMAT");
  await model.restoreKV(snapshot);
  assert.ok((await model.generateText("Once upon a time", { temperature: 0, maxTokens: 4 })).tokens.length > 0);
});
