/**
 * A model folder whose JSON files nest without bound is refused as MODEL_FORMAT
 * naming the file, never INTERNAL from a call stack that ran out.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isInferenceError, loadModel, MAX_JSON_DEPTH } from "@infer/core";
import "../../src/index.js";
import { writeRandomHf } from "../../src/testing/index.js";

const DEEP = 200_000;
const deepArray = "[".repeat(DEEP) + "]".repeat(DEEP);

async function withModel(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "infer-deep-json-"));
  try {
    await writeRandomHf(dir, { architecture: "llama", seed: 3 });
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function refusedNaming(file: string) {
  return (error: unknown) => {
    assert.ok(isInferenceError(error, "MODEL_FORMAT"), `expected MODEL_FORMAT, got ${String(error)}`);
    assert.ok(error.message.includes(file), `"${error.message}" should name ${file}`);
    return true;
  };
}

/** Replaces the value of `key` in a JSON file's text with `value` (raw JSON text). */
async function setRaw(path: string, key: string, value: string): Promise<void> {
  const json = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  json[key] = "\u0000placeholder";
  await writeFile(path, JSON.stringify(json).replace('"\\u0000placeholder"', value));
}

for (const [file, key] of [
  ["config.json", "hidden_size"],
  ["tokenizer.json", "normalizer"],
  ["tokenizer_config.json", "chat_template"],
] as const) {
  test(`a ${file} nested ${DEEP} deep is MODEL_FORMAT naming it`, async () => {
    await withModel(async (dir) => {
      const path = join(dir, file);
      await readFile(path).catch(() => writeFile(path, "{}"));
      await setRaw(path, key, deepArray);
      await assert.rejects(loadModel(dir, { backend: "wasm" }), refusedNaming(file));
    });
  });
}

test("Sequence normalizers nested past the bound are refused; a few levels still load", async () => {
  const sequence = (depth: number) =>
    '{"type":"Sequence","normalizers":['.repeat(depth) + '{"type":"NFC"}' + "]}".repeat(depth);
  await withModel(async (dir) => {
    await setRaw(join(dir, "tokenizer.json"), "normalizer", sequence(MAX_JSON_DEPTH));
    await assert.rejects(loadModel(dir, { backend: "wasm" }), refusedNaming("tokenizer.json"));
    await setRaw(join(dir, "tokenizer.json"), "normalizer", sequence(3));
    const model = await loadModel(dir, { backend: "wasm" });
    await model.close();
  });
});

test("a config field holding a huge nested array is reported by its shape, not printed", async () => {
  await withModel(async (dir) => {
    await setRaw(join(dir, "config.json"), "hidden_size", "[".repeat(MAX_JSON_DEPTH - 1) + "]".repeat(MAX_JSON_DEPTH - 1));
    await assert.rejects(loadModel(dir, { backend: "wasm" }), (error: unknown) => {
      assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
      assert.match(error.message, /config\.json: field hidden_size must be a number, got array of 1/);
      return true;
    });
  });
});
