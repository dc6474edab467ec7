import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { capabilitiesOf, isKVSnapshotModel, loadModel, type LoadOptions, wrapSnapshot } from "@infer/core";
import { assertChatPrefixReuse, assertCode, assertKVSnapshotResumes } from "@infer/core/testing";
import "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing } from "./wasm-link.js";

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

/** A snapshot's envelope header and llama.cpp state, and a snapshot of `state` under that header with its checksum redone. */
function openSnapshot(snapshot: Uint8Array) {
  const length = new DataView(snapshot.buffer, snapshot.byteOffset).getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(snapshot.subarray(12, 12 + length))) as Record<string, unknown>;
  const state = snapshot.slice(12 + length);
  const rewrap = (body: Uint8Array) => wrapSnapshot("ILKV", 1, { ...header, sha256: createHash("sha256").update(body).digest("hex") }, body);
  return { state, rewrap };
}

test("llama_cpp: a crafted state with a valid checksum is MODEL_FORMAT, never a native abort", { skip: skipWithoutStories }, async () => {
  await using model = await load({ parallelSlots: 1 });
  assert.ok(isKVSnapshotModel(model));
  await model.generateText("Once upon a time", { temperature: 0, maxTokens: 8 });
  const snapshot = await model.snapshotKV();
  const { state, rewrap } = openSnapshot(snapshot);
  const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tokens = view(state).getUint32(8, true);
  const cellCountAt = 12 + 4 * tokens + 4; // after the tokens and the stream count
  const crafted: [string, Uint8Array][] = [];
  // Shorter than its sizes say: llama.cpp's reader clamps the read and GGML_ASSERT(nread <= state_size) aborted.
  crafted.push(["truncated", state.subarray(0, state.length - 100)]);
  const moreCells = state.slice();
  view(moreCells).setUint32(cellCountAt, view(state).getUint32(cellCountAt, true) + 1, true);
  crafted.push(["one cell more than it holds", moreCells]);
  const hugeCount = state.slice();
  view(hugeCount).setUint32(cellCountAt, 2 ** 31, true);
  crafted.push(["2^31 cells", hugeCount]);
  // Positions past the tokens: restored, then every evaluation failed (INTERNAL).
  const shifted = state.slice();
  view(shifted).setInt32(cellCountAt + 4, 1000, true);
  crafted.push(["a cell at position 1000", shifted]);
  for (const [name, body] of crafted) {
    await assert.rejects(model.restoreKV(rewrap(body)), (error: Error & { code?: string }) => {
      assert.equal(error.code, "MODEL_FORMAT", `${name}: ${error.message}`);
      return true;
    });
  }
  await model.restoreKV(snapshot);
  assert.equal((await model.generateText(" the", { temperature: 0, maxTokens: 4 })).tokens.length, 4);
});

test("llama_cpp: the state of a model with sliding-window layers (two caches) walks and resumes", { skip: wasmBuildMissing }, async () => {
  const path = join(await mkdtemp(join(tmpdir(), "infer-kv-swa-")), "gemma3.gguf");
  await (await loadWasmKit()).writeRandomGguf(path, { architecture: "gemma3", seed: 7 });
  await using model = await loadModel(path, { ...TEST_LOAD, contextLength: 128, parallelSlots: 1 });
  await using fresh = await loadModel(path, { ...TEST_LOAD, contextLength: 128, parallelSlots: 1 });
  assert.ok(isKVSnapshotModel(model) && isKVSnapshotModel(fresh));
  const greedy = { temperature: 0, maxTokens: 6 };
  await model.generateText("Hello there, the answer is", greedy);
  const snapshot = await model.snapshotKV();
  const expected = await model.generateText(" and", greedy);
  await fresh.restoreKV(snapshot);
  assert.deepEqual((await fresh.generateText(" and", greedy)).tokens.map((t) => t.id), expected.tokens.map((t) => t.id));
});
