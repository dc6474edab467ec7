/**
 * The test converter refuses what it does not convert, by name, before
 * anything is sized from the files. (That it converts the shared
 * tinystories-656k folder correctly is checked in agreement.test.ts against
 * the folder's published greedy output.)
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isInferenceError, type ErrorCode } from "@infer/core";
import { MODELS_DIR } from "./fixtures.js";
import { convertHfLlamaToGguf } from "./hf-llama-to-gguf.js";
import { loadWasmKit, wasmBuildMissing, type WasmKit } from "./wasm-link.js";

const TINYSTORIES = join(MODELS_DIR, "tinystories-656k");
const JSON_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"];
const skip =
  wasmBuildMissing ?? (existsSync(join(TINYSTORIES, "config.json")) ? false : `needs ${TINYSTORIES} (the shared test models are absent)`);

type Json = Record<string, unknown>;

describe("convertHfLlamaToGguf refusals", { skip }, () => {
  let kit: WasmKit;
  let dir: string;
  let count = 0;
  before(async () => {
    kit = await loadWasmKit();
    dir = await mkdtemp(join(tmpdir(), "infer-hf-convert-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A copy of the folder's JSON files (no weights: every refusal comes before them) with one file edited. */
  async function editedCopy(file: string, edit: (json: Json) => void): Promise<string> {
    const folder = await mkdtemp(join(dir, `case-${count++}-`));
    for (const name of JSON_FILES) await copyFile(join(TINYSTORIES, name), join(folder, name));
    const json = JSON.parse(await readFile(join(folder, file), "utf8")) as Json;
    edit(json);
    await writeFile(join(folder, file), JSON.stringify(json));
    return folder;
  }

  async function assertRefused(folder: string, code: ErrorCode, message: RegExp): Promise<void> {
    await assert.rejects(convertHfLlamaToGguf(kit, folder, join(folder, "out.gguf")), (error: unknown) => {
      assert.ok(isInferenceError(error, code), `expected InferenceError ${code}, got ${String(error)}`);
      assert.match(error.message, message);
      assert.ok(error.message.includes(folder), "the message names the folder");
      return true;
    });
    assert.equal(existsSync(join(folder, "out.gguf")), false, "nothing was written");
  }

  it("RoPE scaling, biases or another activation: UNSUPPORTED", async () => {
    await assertRefused(await editedCopy("config.json", (c) => (c.rope_scaling = { type: "linear", factor: 2 })), "UNSUPPORTED", /rope_scaling/);
    await assertRefused(await editedCopy("config.json", (c) => (c.attention_bias = true)), "UNSUPPORTED", /biases/);
    await assertRefused(await editedCopy("config.json", (c) => (c.hidden_act = "gelu")), "UNSUPPORTED", /hidden_act gelu/);
  });

  it("a tokenizer that llama.cpp's converter would not take the llama_hf path for: UNSUPPORTED", async () => {
    const folder = await editedCopy("tokenizer.json", (t) => ((t.model as Json).byte_fallback = false));
    await assertRefused(folder, "UNSUPPORTED", /byte fallback/);
  });

  it("sizes that contradict each other or the files: MODEL_FORMAT, before any allocation from them", async () => {
    await assertRefused(await editedCopy("config.json", (c) => (c.vocab_size = 2 ** 40)), "MODEL_FORMAT", /2048 tokens, config.json vocab_size is 1099511627776/);
    await assertRefused(await editedCopy("config.json", (c) => (c.num_attention_heads = 7)), "MODEL_FORMAT", /num_key_value_heads 4 does not divide/);
    await assertRefused(await editedCopy("config.json", (c) => (c.hidden_size = -128)), "MODEL_FORMAT", /hidden_size is -128/);
  });

  it("a special token missing from the vocabulary, or a config that is not JSON: MODEL_FORMAT", async () => {
    const folder = await editedCopy("tokenizer_config.json", (t) => (t.eos_token = "<|no such token|>"));
    await assertRefused(folder, "MODEL_FORMAT", /eos_token "<\|no such token\|>" is not in the vocabulary/);
    const broken = await editedCopy("config.json", () => undefined);
    await writeFile(join(broken, "config.json"), "{ not json");
    await assertRefused(broken, "MODEL_FORMAT", /config\.json: not readable JSON/);
  });
});
