/**
 * Paths that name no regular file: a named pipe (opening one for reading waits for a writer, forever if
 * none comes) and a device. Every file a model or adapter load reads is refused with MODEL_FORMAT naming
 * it, at once; a dataset may still come through a pipe.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { constants } from "node:fs";
import { cp, mkdir, mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import { readJsonlDataset } from "../../src/dataset/file.js";
import type { ExampleTokenizer } from "../../src/dataset/index.js";
import "../../src/index.js";
import { writeRandomGguf, writeRandomHf } from "../../src/testing/index.js";

const skip = process.platform === "win32" ? "named pipes here are a POSIX file type (mkfifo)" : false;
const LOAD = { backend: "wasm", threads: 1 } as const;

const refused = (...fragments: string[]) => (error: unknown) => {
  assert.ok(isInferenceError(error, "MODEL_FORMAT"), `expected MODEL_FORMAT, got ${String(error)}`);
  assert.match(error.message, /not a regular file/);
  for (const fragment of fragments) assert.ok(error.message.includes(fragment), `"${error.message}" lacks "${fragment}"`);
  return true;
};

describe("pipes and devices where a file is expected", { skip, timeout: 60_000 }, () => {
  let dir: string;
  const pipes: string[] = [];
  const makePipe = (path: string) => {
    execFileSync("mkfifo", [path]);
    pipes.push(path);
    return path;
  };
  let hf: string;
  let gguf: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-special-files-"));
    hf = join(dir, "hf");
    await writeRandomHf(hf, { architecture: "llama", seed: 3 });
    gguf = join(dir, "model.gguf");
    await writeRandomGguf(gguf, { architecture: "llama", seed: 3 });
  });
  after(async () => {
    // Should a reader still wait on a pipe (the bug these tests guard against), a writer opened here
    // releases it, so the process can end and the failure be reported.
    for (const pipe of pipes) await open(pipe, constants.O_WRONLY | constants.O_NONBLOCK).then((h) => h.close(), () => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  test("a model path that is a pipe: MODEL_FORMAT on wasm, and no backend claims it by default", async () => {
    const pipe = makePipe(join(dir, "pipe.gguf"));
    await assert.rejects(loadModel(pipe, LOAD), refused(pipe));
    await assert.rejects(loadModel(pipe, { threads: 1 }), (error: unknown) => isInferenceError(error, "NO_BACKEND_FOR_FORMAT"));
  });

  test("a folder model whose config.json, tokenizer.json or weights are a pipe: MODEL_FORMAT naming that file", async () => {
    for (const name of ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]) {
      const folder = join(dir, `hf-${name}`);
      await cp(hf, folder, { recursive: true });
      await rm(join(folder, name));
      makePipe(join(folder, name));
      await assert.rejects(loadModel(folder, LOAD), refused(join(folder, name)), name);
    }
  });

  test("an adapter that is a pipe or a device, or a PEFT folder whose files are pipes: MODEL_FORMAT naming it", async () => {
    for (const adapterPath of [makePipe(join(dir, "adapter.gguf")), "/dev/zero"]) {
      await assert.rejects(loadModel(gguf, { ...LOAD, adapterPath }), refused(adapterPath));
    }
    const peft = join(dir, "peft");
    await mkdir(peft);
    const config = makePipe(join(peft, "adapter_config.json"));
    await assert.rejects(loadModel(gguf, { ...LOAD, adapterPath: peft }), refused(config));
  });

  test("a JSONL dataset may come through a pipe", async () => {
    const pipe = makePipe(join(dir, "data.jsonl"));
    // One token per character: the dataset is what is read here, not the tokenizer.
    const tokenizer: ExampleTokenizer = {
      encode: (text) => Array.from(text, (c) => c.charCodeAt(0) % 64),
      eosId: 1,
      renderChat: () => assert.fail("no chat records here"),
    };
    const written = writeFile(pipe, '{"text": "one"}\n{"text": "two"}\n');
    const [{ stats }] = await Promise.all([readJsonlDataset(pipe, tokenizer), written]);
    assert.equal(stats.examples, 2);
  });
});
