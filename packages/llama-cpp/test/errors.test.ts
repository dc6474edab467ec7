import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { constants } from "node:fs";
import { mkdir, mkdtemp, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { getBackend, listBackends, loadModel, type ProbeEvent } from "@infer/core";
import { defaultThreads } from "../src/choice.js";
import "../src/index.js";
import type { LlamaCppModel } from "../src/index.js";
import { getRuntime } from "../src/runtime.js";
import { rejectsWith, skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

let scratch: string;
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), "infer-llama-cpp-errors-"));
});

test("the backend registers on import, is available and sniffs GGUF", async () => {
  assert.ok(listBackends().includes("llama_cpp"));
  const backend = getBackend("llama_cpp");
  assert.equal(await backend.available(), true);
  const text = join(scratch, "notes.txt");
  await writeFile(text, "plain text");
  assert.equal(await backend.canLoad(text), false);
  if (!skipWithoutStories) assert.equal(await backend.canLoad(STORIES_GGUF), true);
});

test("a named pipe is no model: canLoad is false and loading is MODEL_FORMAT, neither waiting for a writer", { skip: process.platform === "win32", timeout: 60_000 }, async () => {
  const pipe = join(scratch, "pipe.gguf");
  execFileSync("mkfifo", [pipe]);
  try {
    assert.equal(await getBackend("llama_cpp").canLoad(pipe), false);
    await assert.rejects(loadModel(pipe, TEST_LOAD), rejectsWith("MODEL_FORMAT", pipe, "not a file"));
  } finally {
    // Should a reader still wait on it (the bug this guards against), a writer releases it.
    await open(pipe, constants.O_WRONLY | constants.O_NONBLOCK).then((h) => h.close(), () => undefined);
  }
});

test("a missing model is MODEL_NOT_FOUND", async () => {
  await assert.rejects(loadModel(join(scratch, "absent.gguf"), TEST_LOAD), rejectsWith("MODEL_NOT_FOUND", "absent.gguf"));
});

test("a non-GGUF file is MODEL_FORMAT naming the file", async () => {
  const path = join(scratch, "weights.bin");
  await writeFile(path, Buffer.alloc(4096, 7));
  await assert.rejects(loadModel(path, TEST_LOAD), rejectsWith("MODEL_FORMAT", path, "not a GGUF"));
});

test("a GGUF header without a model is MODEL_FORMAT naming the file", async () => {
  const path = join(scratch, "empty.gguf");
  const bytes = Buffer.alloc(64);
  bytes.write("GGUF", 0, "latin1");
  bytes.writeUInt32LE(3, 4);
  await writeFile(path, bytes);
  await assert.rejects(loadModel(path, TEST_LOAD), rejectsWith("MODEL_FORMAT", path));
});

describe("with the stories260K file", { skip: skipWithoutStories }, () => {
  test("a truncated model file is MODEL_FORMAT", async () => {
    const path = join(scratch, "truncated.gguf");
    const whole = await readFile(STORIES_GGUF);
    await writeFile(path, whole.subarray(0, Math.floor(whole.length / 2)));
    await assert.rejects(loadModel(path, TEST_LOAD), rejectsWith("MODEL_FORMAT", path));
  });

  test("a model followed by gigabytes it does not describe is MODEL_FORMAT before llama.cpp maps and reads them", async () => {
    const path = join(scratch, "long-tail.gguf");
    await writeFile(path, await readFile(STORIES_GGUF));
    await truncate(path, 4 * 2 ** 30); // sparse where the file system allows: no disk spent
    try {
      await assert.rejects(loadModel(path, TEST_LOAD), rejectsWith("MODEL_FORMAT", path, "follow the last tensor's data"));
    } finally {
      await rm(path);
    }
  });

  test("a context larger than memory allows is CONTEXT_OVERFLOW; past llama.cpp's limits INVALID_OPTION", async () => {
    // 2^30 tokens of this model's KV cache (640 bytes each) would need ~690 GB.
    await assert.rejects(
      loadModel(STORIES_GGUF, { ...TEST_LOAD, contextLength: 2 ** 30, parallelSlots: 1 }),
      rejectsWith("CONTEXT_OVERFLOW", "contextLength"),
    );
    await assert.rejects(
      loadModel(STORIES_GGUF, { ...TEST_LOAD, contextLength: 2 ** 31, parallelSlots: 64 }),
      rejectsWith("INVALID_OPTION", "contextLength", "parallelSlots"),
    );
  });

  test("options the backend cannot honour are refused", async () => {
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, quantize: "q8_0" }), rejectsWith("UNSUPPORTED", "quantize"));
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, threads: 0 }), rejectsWith("INVALID_OPTION", "threads"));
  });

  test("LoRA adapters: missing, PEFT folder, non-GGUF file, pipe or device", async () => {
    await assert.rejects(
      loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: join(scratch, "no-adapter.gguf") }),
      rejectsWith("MODEL_NOT_FOUND", "no-adapter.gguf"),
    );
    const peft = join(scratch, "peft-adapter");
    await mkdir(peft, { recursive: true });
    await writeFile(join(peft, "adapter_config.json"), JSON.stringify({ r: 8, lora_alpha: 16 }));
    await assert.rejects(
      loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: peft }),
      rejectsWith("UNSUPPORTED", "PEFT", "infer convert-lora"),
    );
    const text = join(scratch, "adapter.txt");
    await writeFile(text, "not an adapter");
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath: text }), rejectsWith("MODEL_FORMAT", text));
    if (process.platform !== "win32") {
      const pipe = join(scratch, "adapter-pipe.gguf");
      execFileSync("mkfifo", [pipe]);
      for (const adapterPath of [pipe, "/dev/zero"]) {
        await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, adapterPath }), rejectsWith("MODEL_FORMAT", adapterPath, "not a file"));
      }
    }
  });

  test("threads default to one fewer than llama.cpp's count of physical cores (defaultThreads); probes see each token", async () => {
    const events: ProbeEvent[] = [];
    const { threads: _threads, ...withoutThreads } = TEST_LOAD;
    const model = (await loadModel(STORIES_GGUF, { ...withoutThreads, parallelSlots: 1, probe: (e) => events.push(e) })) as LlamaCppModel;
    try {
      assert.equal(model.threads, defaultThreads((await getRuntime()).cpuMathCores));
      assert.ok(model.threads >= 1);
      const result = await model.generateText("Once", { temperature: 0, maxTokens: 5 });
      const tokens = events.filter((e) => e.kind === "token");
      assert.deepEqual(
        tokens.map((e) => (e.kind === "token" ? e.payload.id : -1)),
        result.tokens.map((t) => t.id),
      );
      const promptLength = model.encode("Once").length;
      assert.deepEqual(
        tokens.map((e) => (e.kind === "token" ? e.payload.position : -1)),
        [0, 1, 2, 3, 4].map((i) => promptLength + i),
      );
    } finally {
      await model.close();
    }
  });

  test("a missing draft model is MODEL_NOT_FOUND", async () => {
    await assert.rejects(
      loadModel(STORIES_GGUF, { ...TEST_LOAD, draftModel: join(scratch, "no-draft.gguf") }),
      rejectsWith("MODEL_NOT_FOUND", "no-draft.gguf"),
    );
  });

  describe("bad call options and close", () => {
    let model: LlamaCppModel;
    before(async () => {
      model = (await loadModel(STORIES_GGUF, TEST_LOAD)) as LlamaCppModel;
    });
    after(async () => {
      await model?.close();
    });

    test("bad generate options are INVALID_OPTION and the model stays usable", async () => {
      await assert.rejects(model.generateText("Once", { temperature: -1 }), rejectsWith("INVALID_OPTION", "temperature"));
      await assert.rejects(
        model.generateText("Once", { grammar: "root ::= 'x'", jsonSchema: { type: "string" } }),
        rejectsWith("INVALID_OPTION", "grammar", "jsonSchema"),
      );
      await assert.rejects(model.classify(["Once"], { maxTokens: 3 } as object), rejectsWith("INVALID_OPTION", "maxTokens"));
      const ok = await model.generateText("Once", { temperature: 0, maxTokens: 4 });
      assert.equal(ok.tokens.length, 4);
    });

    test("grammars past GRAMMAR_LIMITS are INVALID_OPTION before llama.cpp parses them", async () => {
      // Each of these ended the process (SIGSEGV: llama.cpp's GBNF parser and grammar setup recurse without
      // bound on the native stack) or took a minute of CPU before it was checked.
      const nested = `root ::= ${"(".repeat(30_000)}"a"${")".repeat(30_000)}`;
      const chained = Array.from({ length: 30_000 }, (_, i) => `r${i} ::= r${i + 1} "a"`).join("\n") + '\nr30000 ::= "b"\nroot ::= r0';
      const alternatives = `root ::= ${Array.from({ length: 100_000 }, (_, i) => `"a${i}"`).join(" | ")}`;
      await assert.rejects(model.generateText("Once", { grammar: nested, maxTokens: 3 }), rejectsWith("INVALID_OPTION", "grammar", "maxNesting"));
      await assert.rejects(model.generateText("Once", { grammar: chained, maxTokens: 3 }), rejectsWith("INVALID_OPTION", "grammar", "maxChars"));
      await assert.rejects(model.generateText("Once", { grammar: alternatives, maxTokens: 3 }), rejectsWith("INVALID_OPTION", "grammar", "maxChars"));
      // A schema is bounded through the grammar node-llama-cpp derives from it.
      const enumeration = { enum: Array.from({ length: 20_000 }, (_, i) => `value ${i}`) };
      await assert.rejects(model.generateText("Once", { jsonSchema: enumeration, maxTokens: 3 }), rejectsWith("INVALID_OPTION", "jsonSchema", "maxChars"));
      // Within the limits: 256 nested groups and 1 000 chained rules still constrain the output.
      const deep = await model.generateText("Once", { grammar: `root ::= ${"(".repeat(256)}"a"${")".repeat(256)}`, maxTokens: 3, temperature: 0 });
      assert.equal(deep.text, "a");
      const rules = Array.from({ length: 1_000 }, (_, i) => `r${i} ::= r${i + 1} "a"`).join("\n") + '\nr1000 ::= "b"\nroot ::= r0';
      const chain = await model.generateText("Once", { grammar: rules, maxTokens: 3, temperature: 0 });
      assert.equal(chain.text, "baa");
    });

    test("close: idempotent, every later call is CLOSED", async () => {
      const closing = await loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1 });
      const llama = closing as LlamaCppModel;
      await closing.close();
      await closing.close();
      await assert.rejects(closing.generateText("Once"), rejectsWith("CLOSED"));
      await assert.rejects(closing.batchGenerate(["Once"]), rejectsWith("CLOSED"));
      await assert.rejects(closing.classify(["Once"]), rejectsWith("CLOSED"));
      await assert.rejects(llama.embed(["Once"]), rejectsWith("CLOSED"));
      assert.throws(() => llama.encode("Once"), rejectsWith("CLOSED"));
      // Closing one model leaves others loaded from the same runtime working.
      assert.equal((await model.generateText("Once", { temperature: 0, maxTokens: 3 })).tokens.length, 3);
    });

    test("close during a stream ends it with CLOSED", async () => {
      const closing = await loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1 });
      let seen = 0;
      await assert.rejects(
        (async () => {
          for await (const _ of closing.generate("Once", { temperature: 0, ignoreEos: true })) {
            if (++seen === 2) void closing.close();
          }
        })(),
        rejectsWith("CLOSED"),
      );
      assert.ok(seen >= 2);
    });
  });
});
