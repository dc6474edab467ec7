import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError, loadModel, type TextModel } from "@infer/core";
import { defaultThreads, fasterBackend, fasterBackendFor, GGUF_BACKEND_ENV, ggufBackendChoice } from "../src/choice.js";
import { runtimeAvailable } from "../src/runtime.js";
import { skipWithoutStories, STORIES_GGUF } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing, type WasmKit } from "./wasm-link.js";

const F16 = 1;
const Q8_0 = 8;

test("default threads: one fewer than the physical cores, at least one", () => {
  assert.equal(defaultThreads(1), 1);
  assert.equal(defaultThreads(2), 1);
  assert.equal(defaultThreads(4), 3);
  assert.equal(defaultThreads(16), 15);
});

test("GGUF files stay on llama_cpp unless INFER_GGUF_BACKEND=wasm; a LoRA adapter or a draft model always stays", () => {
  assert.equal(fasterBackend("auto", {}), undefined);
  assert.equal(fasterBackend("llama_cpp", {}), undefined);
  assert.equal(fasterBackend("wasm", { contextLength: 64 }), "wasm");
  assert.equal(fasterBackend("wasm", { adapterPath: "lora.gguf" }), undefined);
  assert.equal(fasterBackend("wasm", { draftModel: "draft.gguf" }), undefined);
});

test("a PEFT adapter folder sends a GGUF model to wasm, which reads it (llama.cpp reads GGUF adapters only)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-choice-peft-"));
  try {
    const peft = join(dir, "peft");
    await mkdir(peft);
    await writeFile(join(peft, "adapter_config.json"), "{}");
    assert.equal(await fasterBackendFor("model.gguf", { adapterPath: peft }), "wasm");
    assert.equal(await fasterBackendFor("model.gguf", { adapterPath: join(dir, "lora.gguf") }), fasterBackend(ggufBackendChoice(), { adapterPath: "x" }));
    assert.equal(await fasterBackendFor("model.gguf", { adapterPath: peft, draftModel: "draft.gguf" }), undefined);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("INFER_GGUF_BACKEND: auto by default, case-insensitive, unknown values refused", () => {
  assert.equal(ggufBackendChoice({}), "auto");
  assert.equal(ggufBackendChoice({ [GGUF_BACKEND_ENV]: " WASM " }), "wasm");
  assert.equal(ggufBackendChoice({ [GGUF_BACKEND_ENV]: "llama_cpp" }), "llama_cpp");
  assert.throws(
    () => ggufBackendChoice({ [GGUF_BACKEND_ENV]: "fastest" }),
    (error: unknown) => isInferenceError(error, "INVALID_OPTION") && error.details?.env === GGUF_BACKEND_ENV,
  );
});

const llamaMissing = (await runtimeAvailable()) ? false : "the llama.cpp runtime is not available here";

describe("the backend a GGUF file gets", { skip: llamaMissing || wasmBuildMissing || false }, () => {
  let kit: WasmKit;
  let dir: string;
  const opened: TextModel[] = [];
  before(async () => {
    kit = await loadWasmKit(); // registers "wasm" beside this package's "llama_cpp"
    await import("../src/index.js");
    dir = await mkdtemp(join(tmpdir(), "infer-backend-choice-"));
  });
  after(async () => {
    for (const model of opened) await model.close();
    await rm(dir, { recursive: true, force: true });
  });
  const load = async (path: string, options = {}) => {
    const model = await loadModel(path, { threads: 1, contextLength: 64, parallelSlots: 1, ...options });
    opened.push(model);
    return model;
  };

  /** Loads `path` with INFER_GGUF_BACKEND set to `choice` (unset for undefined). */
  const loadWith = async (choice: string | undefined, path: string, options = {}) => {
    if (choice === undefined) delete process.env[GGUF_BACKEND_ENV];
    else process.env[GGUF_BACKEND_ENV] = choice;
    try {
      return await load(path, options);
    } finally {
      delete process.env[GGUF_BACKEND_ENV];
    }
  };

  test("stories260K goes to llama_cpp; to wasm with INFER_GGUF_BACKEND=wasm, unless llama_cpp is pinned", { skip: skipWithoutStories }, async () => {
    assert.equal((await loadWith(undefined, STORIES_GGUF)).backend, "llama_cpp");
    assert.equal((await loadWith("llama_cpp", STORIES_GGUF)).backend, "llama_cpp");
    assert.equal((await loadWith("wasm", STORIES_GGUF)).backend, "wasm");
    assert.equal((await loadWith("wasm", STORIES_GGUF, { backend: "llama_cpp" })).backend, "llama_cpp");
  });

  test("random Q8_0 and F16 files go to llama_cpp by default, to wasm when asked", async () => {
    const q8 = join(dir, "q8_0.gguf");
    const f16 = join(dir, "f16.gguf");
    await kit.writeRandomGguf(q8, { architecture: "llama", seed: 3, type: Q8_0 });
    await kit.writeRandomGguf(f16, { architecture: "llama", seed: 3, type: F16 });
    for (const path of [q8, f16]) {
      assert.equal((await loadWith(undefined, path)).backend, "llama_cpp");
      assert.equal((await loadWith("wasm", path)).backend, "wasm");
    }
  });

  test("an unknown INFER_GGUF_BACKEND fails the load with INVALID_OPTION", { skip: skipWithoutStories }, async () => {
    await assert.rejects(loadWith("gpu", STORIES_GGUF), (error: unknown) => isInferenceError(error, "INVALID_OPTION"));
  });
});
