/**
 * Backend "wasm" on its default WebAssembly SIMD kernels: the published greedy
 * output of stories260K reproduced exactly at 1 and 2 threads, the kernel
 * choice through INFER_WASM_KERNELS, and the memory a model hands back when it
 * shares a caller's kernels.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { InferenceError, isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import { GgmlType } from "@infer/formats";
import "../../src/index.js";
import { createWasmKernels, relaxedSimdSupported } from "../../src/kernels/wasm/index.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import { KERNELS_ENV, loadWasmModel } from "../../src/model/backend.js";
import { writeRandomGguf } from "../../src/testing/index.js";

const shared = fileURLToPath(new URL("../../../../../../shared/models/", import.meta.url));
const skip = existsSync(shared) ? undefined : `shared models not found at ${shared} (a clone outside this workplace has none)`;
const storiesGguf = `${shared}stories260K/stories260K.gguf`;
const expected = skip ? "" : readFileSync(`${shared}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");

const savedEnv = process.env[KERNELS_ENV];
after(() => {
  if (savedEnv === undefined) delete process.env[KERNELS_ENV];
  else process.env[KERNELS_ENV] = savedEnv;
});

for (const threads of [1, 2]) {
  test(`stories260K on the WASM kernels at ${threads} thread(s): llama2.c's published 200 greedy tokens`, { skip }, async () => {
    delete process.env[KERNELS_ENV];
    await using model = await loadModel(storiesGguf, { backend: "wasm", threads });
    const result = await model.generateText("", { maxTokens: 200, temperature: 0 });
    assert.equal(result.tokens.length, 200);
    assert.equal(result.text, expected);
  });
}

test(`${KERNELS_ENV}=reference runs the TypeScript kernels, with the same output`, { skip }, async () => {
  process.env[KERNELS_ENV] = "reference";
  try {
    await using model = await loadModel(storiesGguf, { backend: "wasm" });
    const result = await model.generateText("", { maxTokens: 60, temperature: 0 });
    assert.equal(result.text, expected.slice(0, result.text.length));
    assert.ok(result.text.length > 100, "60 tokens of text");
  } finally {
    delete process.env[KERNELS_ENV];
  }
});

test(`${KERNELS_ENV}=wasm-simd runs the kernels without relaxed SIMD; wasm-relaxed-simd needs a runtime that has it`, { skip }, async () => {
  try {
    process.env[KERNELS_ENV] = "wasm-simd";
    {
      await using model = await loadModel(storiesGguf, { backend: "wasm", threads: 1 });
      const result = await model.generateText("", { maxTokens: 60, temperature: 0 });
      assert.equal(result.text, expected.slice(0, result.text.length));
      assert.ok(result.text.length > 100, "60 tokens of text");
    }
    process.env[KERNELS_ENV] = "wasm-relaxed-simd";
    if (relaxedSimdSupported()) {
      await using model = await loadModel(storiesGguf, { backend: "wasm", threads: 1 });
      const result = await model.generateText("", { maxTokens: 60, temperature: 0 });
      assert.equal(result.text, expected.slice(0, result.text.length));
    } else {
      await assert.rejects(loadModel(storiesGguf, { backend: "wasm" }), (error: unknown) => {
        assert.ok(isInferenceError(error, "INVALID_OPTION"), String(error));
        assert.match((error as Error).message, /relaxed SIMD/);
        return true;
      });
    }
  } finally {
    delete process.env[KERNELS_ENV];
  }
});

test(`an unknown ${KERNELS_ENV} value is INVALID_OPTION naming the variable`, { skip }, async () => {
  process.env[KERNELS_ENV] = "cuda";
  try {
    await assert.rejects(loadModel(storiesGguf, { backend: "wasm" }), (error: unknown) => {
      assert.ok(isInferenceError(error, "INVALID_OPTION"), String(error));
      assert.match((error as Error).message, new RegExp(KERNELS_ENV));
      return true;
    });
  } finally {
    delete process.env[KERNELS_ENV];
  }
});

test("models sharing a caller's kernels give their memory back on close, and the kernels stay usable", { skip }, async () => {
  const kernels = await createWasmKernels({ threads: 2 });
  try {
    const first = await loadWasmModel(storiesGguf, { kernels, contextLength: 256, parallelSlots: 1 });
    const text = (await first.generateText("", { maxTokens: 40, temperature: 0 })).text;
    assert.equal(text, expected.slice(0, text.length));
    await first.close();
    // The file bytes, KV cache and scratch of the first model are free again: a second
    // model of the same size reuses them (the probe allocation lands below the old top).
    const probeBefore = kernels.allocate!(64);
    kernels.release!(probeBefore);
    const second = await loadWasmModel(storiesGguf, { kernels, contextLength: 256, parallelSlots: 1 });
    assert.equal((await second.generateText("", { maxTokens: 40, temperature: 0 })).text, text);
    await second.close();
    const probeAfter = kernels.allocate!(64);
    assert.equal(probeAfter.byteOffset, probeBefore.byteOffset, "the second model's memory was handed back as well");
    kernels.release!(probeAfter);
  } finally {
    await kernels.dispose?.();
  }
});

test("a model file larger than the kernels' memory is UNSUPPORTED naming the file", { skip }, async () => {
  // Kernels whose memory is full: allocate refuses as the WebAssembly arena does past 4 GiB.
  const full = {
    ...referenceKernels,
    allocate(): Uint8Array {
      throw new InferenceError("UNSUPPORTED", "kernel memory: cannot grow");
    },
  };
  await assert.rejects(loadWasmModel(storiesGguf, { kernels: full }), (error: unknown) => {
    assert.ok(isInferenceError(error, "UNSUPPORTED"), String(error));
    assert.match((error as Error).message, /stories260K\.gguf/);
    assert.match((error as Error).message, /INFER_WASM_KERNELS=reference/);
    return true;
  });
});

test("a GGUF that fails to load leaves a caller's kernels' memory as it found it", async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-wasm-failed-load-"));
  const kernels = await createWasmKernels({ threads: 2 });
  try {
    const good = join(dir, "good.gguf");
    await writeRandomGguf(good, { architecture: "llama", seed: 3, type: GgmlType.Q8_0 });
    const bytes = await readFile(good);
    const header = bytes.indexOf(Buffer.from("token_embd.weight")); // inside the tensor table
    const cases: [string, Uint8Array, string][] = [
      ["cut inside its tensor data", bytes.subarray(0, bytes.length - 100), "beyond the file"],
      ["cut inside its header", bytes.subarray(0, header + 4), "GGUF"],
      ["a tensor renamed, so the model misses one", Buffer.from(bytes).fill(0x78, header, header + 5), "token_embd"],
    ];
    const probe = (): number => {
      const view = kernels.allocate!(64);
      kernels.release!(view);
      return view.byteOffset;
    };
    const before = probe();
    for (const [what, content, mention] of cases) {
      const path = join(dir, "bad.gguf");
      await writeFile(path, content);
      await assert.rejects(loadWasmModel(path, { kernels, contextLength: 64, parallelSlots: 1 }), (error: unknown) => {
        assert.ok(isInferenceError(error), `${what}: ${String(error)}`);
        assert.ok(error.message.includes(mention), `${what}: ${error.message}`);
        return true;
      });
      assert.equal(probe(), before, `${what}: the failed load handed every allocation back`);
    }
    // And the kernels still run a model.
    await using model = await loadWasmModel(good, { kernels, contextLength: 64, parallelSlots: 1 });
    assert.equal((await model.generateText("ab", { maxTokens: 4, temperature: 0, ignoreEos: true })).tokens.length, 4);
  } finally {
    await kernels.dispose?.();
    await rm(dir, { recursive: true, force: true });
  }
});
