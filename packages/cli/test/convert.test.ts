import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { listBackends } from "@infer/core";
import { GgmlType, dequantize, getNumber, getString, getStringArray, toFloat32 } from "@infer/formats";
import { readGguf, readSafetensorsModel } from "@infer/formats/node";
import { registerBackends } from "../src/backends.js";
import { convertHfToGguf, permuteRotaryRows } from "../src/convert/index.js";
import { runCli } from "./helpers.js";

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const folder = `${models}tinystories-656k`;
const bin = fileURLToPath(new URL("../src/bin.js", import.meta.url));
const skip = existsSync(folder) ? false : `needs ${folder} (the shared test models are not here)`;

let dir: string;
before(async () => (dir = await mkdtemp(join(tmpdir(), "infer-convert-"))));
after(() => rm(dir, { recursive: true, force: true }));

test("q/k rows go from split-half to interleaved rotary pairs, head by head", () => {
  // 2 heads of 4 rows, 1 column: per head rows [x0 x1 | y0 y1] pair x_i with y_i.
  const rows = Float32Array.from([10, 11, 20, 21, 30, 31, 40, 41]);
  assert.deepEqual(Array.from(permuteRotaryRows(rows, 2, 1)), [10, 20, 11, 21, 30, 40, 31, 41]);
  // Two columns: whole rows move together.
  const wide = Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(Array.from(permuteRotaryRows(wide, 1, 2)), [1, 2, 5, 6, 3, 4, 7, 8]);
});

test("bad input: not a folder, or an architecture the converter does not know", async () => {
  const missing = await runCli(["convert", join(dir, "nope"), join(dir, "x.gguf")]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^infer: error MODEL_NOT_FOUND: .*not a folder/);
  const odd = join(dir, "odd");
  await import("node:fs/promises").then((fs) => fs.mkdir(odd));
  await writeFile(join(odd, "config.json"), JSON.stringify({ model_type: "gpt_neox" }));
  await writeFile(join(odd, "tokenizer.json"), "{}");
  const unsupported = await runCli(["convert", odd, join(dir, "x.gguf")]);
  assert.equal(unsupported.code, 1);
  assert.match(unsupported.stderr, /^infer: error UNSUPPORTED_ARCHITECTURE: .*'gpt_neox'.*llama, mistral, qwen2, qwen3/);
  assert.equal(existsSync(join(dir, "x.gguf")), false);
  const badType = await runCli(["convert", odd, join(dir, "x.gguf"), "--type", "q3"]);
  assert.equal(badType.code, 2);
});

describe("tinystories-656k", { skip }, () => {
  test("F32 GGUF from the HF folder reproduces the float32 reference through every installed backend", async () => {
    const reference = JSON.parse(readFileSync(join(folder, "expected-greedy-100.json"), "utf8"));
    const out = join(dir, "tiny-f32.gguf");
    const converted = await runCli(["convert", folder, out, "--type", "f32"]);
    assert.equal(converted.code, 0, converted.stderr);
    assert.equal(converted.stdout, `${out}\n`);
    await registerBackends();
    const backends = ["wasm", "llama_cpp"].filter((b) => listBackends().includes(b));
    assert.ok(backends.length > 0, "no backend is installed");
    for (const backend of backends) {
      const args = [bin, "run", out, reference.prompt, "-n", "100", "-t", "0", "--threads", "1", "--backend", backend];
      const run = spawnSync(process.execPath, args, { encoding: "utf8" });
      assert.equal(run.status, 0, run.stderr);
      assert.equal(reference.prompt + run.stdout, `${reference.greedy_text}\n`, backend);
    }
  });

  test("Q8_0 GGUF: llama.cpp metadata, vocabulary in id order, blocks within half a step of the weights", async () => {
    const out = join(dir, "tiny-q8.gguf");
    const result = await convertHfToGguf(folder, out, "q8_0");
    assert.equal(result.architecture, "llama");
    const gguf = await readGguf(out);
    const meta = gguf.metadata;
    assert.equal(getString(meta, "general.architecture"), "llama");
    assert.equal(getNumber(meta, "llama.block_count"), 2);
    assert.equal(getNumber(meta, "llama.attention.head_count_kv"), 4);
    assert.equal(getNumber(meta, "llama.rope.freq_base"), 10000);
    assert.equal(getNumber(meta, "general.file_type"), 7);
    const tokenizer = JSON.parse(readFileSync(join(folder, "tokenizer.json"), "utf8"));
    const tokens = getStringArray(meta, "tokenizer.ggml.tokens");
    assert.equal(tokens?.length, 2048);
    for (const [text, id] of Object.entries(tokenizer.model.vocab as Record<string, number>)) assert.equal(tokens!.get(id), text);
    assert.equal(getNumber(meta, "tokenizer.ggml.bos_token_id"), 1);
    assert.equal(getNumber(meta, "tokenizer.ggml.eos_token_id"), 2);

    const weights = await readSafetensorsModel(folder);
    const embed = gguf.tensorByName("token_embd.weight")!;
    assert.equal(embed.type, GgmlType.Q8_0);
    assert.deepEqual(embed.shape, [128, 2048]);
    assert.equal(gguf.tensorByName("output.weight"), undefined, "tied: llama.cpp reuses token_embd");
    assert.equal(gguf.tensorByName("blk.0.attn_norm.weight")!.type, GgmlType.F32);
    const original = toFloat32(weights.tensors.get("lm_head.weight")!);
    const decoded = dequantize(embed.type, gguf.tensorData(embed), original.length);
    // Q8_0: each block of 32 stores round(x / d) with d = max|x| / 127 kept as f16: |error| <= d / 2 + 127 * d * 2^-11.
    for (let block = 0; block < original.length / 32; block++) {
      const slice = original.subarray(block * 32, block * 32 + 32);
      const d = Math.max(...slice.map(Math.abs)) / 127;
      for (let i = 0; i < 32; i++) assert.ok(Math.abs(decoded[block * 32 + i]! - slice[i]!) <= d * (0.5 + 127 / 2048) + 1e-7, `block ${block}: ${decoded[block * 32 + i]} vs ${slice[i]}, d ${d}`);
    }
  });

  test("Q8_0 and Q4_0 files decode to the same text in llama.cpp and the wasm engine", async (t) => {
    await registerBackends();
    if (!["wasm", "llama_cpp"].every((b) => listBackends().includes(b))) return t.skip("needs both the wasm and llama_cpp backends");
    for (const type of ["q8_0", "q4_0"] as const) {
      const out = join(dir, `tiny-${type}.gguf`);
      await convertHfToGguf(folder, out, type);
      const texts = ["wasm", "llama_cpp"].map((backend) => {
        const run = spawnSync(process.execPath, [bin, "run", out, "Once upon a time", "-n", "30", "-t", "0", "--threads", "1", "--backend", backend], { encoding: "utf8" });
        assert.equal(run.status, 0, run.stderr);
        return run.stdout;
      });
      assert.ok(texts[0]!.length > 30, texts[0]);
      assert.equal(texts[0], texts[1], type);
    }
  });
});
