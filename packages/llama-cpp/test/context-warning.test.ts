import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadModel } from "@infer/core";
import { GgufValueType } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import { assertContextBeyondTrainingWarns } from "@infer/core/testing";
import "../src/index.js";
import { AUTO_CONTEXT_MAX } from "../src/load.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing } from "./wasm-link.js";

test("a context beyond the trained length loads with a warning in info(); within it, none", { skip: skipWithoutStories }, () =>
  assertContextBeyondTrainingWarns((contextLength) => loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1, contextLength })),
);

test(
  "a trained context_length of 2^31-1 sizes no automatic context past AUTO_CONTEXT_MAX, and says so",
  { skip: wasmBuildMissing },
  async () => {
    const { writeRandomGguf } = await loadWasmKit();
    const dir = await mkdtemp(join(tmpdir(), "infer-auto-context-"));
    const source = join(dir, "qwen3.gguf");
    await writeRandomGguf(source, { architecture: "qwen3", seed: 7 });
    const path = join(dir, "huge-context.gguf");
    const gguf = await readGguf(source);
    await writeGgufFile(path, {
      metadata: new Map([...gguf.metadata, ["qwen3.context_length", { type: GgufValueType.UINT32, value: 2 ** 31 - 1 }]]),
      tensors: gguf.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: gguf.tensorData(t) })),
    });
    const { contextLength: _, ...automatic } = TEST_LOAD;
    const model = await loadModel(path, { ...automatic, parallelSlots: 1 });
    try {
      const info = model.info();
      assert.equal(info.trainedContextLength, 2 ** 31 - 1);
      assert.ok(info.contextLength <= AUTO_CONTEXT_MAX, `context ${info.contextLength}`);
      assert.ok(info.warnings?.some((w) => w.includes(`capped at ${AUTO_CONTEXT_MAX}`)), JSON.stringify(info.warnings));
    } finally {
      await model.close();
    }
    // Within the cap, the automatic context is node-llama-cpp's own, without that warning.
    const plain = await loadModel(source, { ...automatic, parallelSlots: 1 });
    try {
      assert.ok(!plain.info().warnings?.some((w) => w.includes("capped")));
    } finally {
      await plain.close();
    }
  },
);
