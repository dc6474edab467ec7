/**
 * LoRA across the tools: PEFT's own adapter (packages/wasm/test/fixtures/lora,
 * made by scripts/reference/peft_adapter.py) converted to GGUF and loaded by
 * llama.cpp on tinystories-656k converted to GGUF, and merged into the
 * weights; every way gives PEFT's logits.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { listBackends, loadModel, type LoadOptions } from "@infer/core";
import { cosineSimilarity } from "@infer/core/testing";
import { getNumber, getString } from "@infer/formats";
import { readGguf } from "@infer/formats/node";
import { registerBackends } from "../src/backends.js";
import { convertHfToGguf } from "../src/convert/index.js";
import { runCli } from "./helpers.js";

const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const folder = `${models}tinystories-656k`;
/** dist/test/ -> packages/wasm/test/fixtures/lora. */
const fixtures = fileURLToPath(new URL("../../../wasm/test/fixtures/lora/", import.meta.url));
const peftAdapter = join(fixtures, "peft-adapter");
const skip = existsSync(folder) ? false : `needs ${folder} (the shared test models are not here)`;

interface PeftLogits {
  prompt: string;
  adapterLogits: number[];
}

describe("LoRA: convert-lora and merge on tinystories-656k", { skip }, () => {
  let dir: string;
  let expected: PeftLogits;
  let baseGguf: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-lora-cli-"));
    expected = JSON.parse(readFileSync(join(fixtures, "peft-logits.json"), "utf8")) as PeftLogits;
    baseGguf = join(dir, "tiny-f32.gguf");
    await convertHfToGguf(folder, baseGguf, "f32");
    await registerBackends();
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function promptLogits(model: string, options: LoadOptions): Promise<Float32Array> {
    const loaded = await loadModel(model, { threads: 1, ...options });
    try {
      return (await loaded.classify([expected.prompt], { logits: true }))[0]!.logits!;
    } finally {
      await loaded.close();
    }
  }

  function assertClose(logits: Float32Array, minimum: number, what: string): void {
    const cosine = cosineSimilarity(logits, expected.adapterLogits);
    assert.ok(cosine >= minimum, `${what}: cosine ${cosine} < ${minimum}`);
  }

  test("convert-lora writes llama.cpp's GGUF LoRA; llama_cpp and wasm load it on the converted base", async () => {
    const out = join(dir, "adapter.gguf");
    const converted = await runCli(["convert-lora", peftAdapter, out, "--base", folder]);
    assert.equal(converted.code, 0, converted.stderr);
    assert.equal(converted.stdout, `${out}\n`);
    const gguf = await readGguf(out);
    assert.equal(getString(gguf.metadata, "general.type"), "adapter");
    assert.equal(getString(gguf.metadata, "adapter.type"), "lora");
    assert.equal(getString(gguf.metadata, "general.architecture"), "llama");
    assert.equal(getNumber(gguf.metadata, "adapter.lora.alpha"), 8);
    const names = gguf.tensors.map((t) => t.name);
    assert.ok(names.includes("blk.0.attn_q.weight.lora_a") && names.includes("blk.1.attn_v.weight.lora_b"), names.join(", "));
    const a = gguf.tensors.find((t) => t.name === "blk.0.attn_q.weight.lora_a")!;
    const b = gguf.tensors.find((t) => t.name === "blk.0.attn_q.weight.lora_b")!;
    assert.deepEqual([a.shape, b.shape], [[128, 4], [4, 128]], "ggml order: A [in, r], B [r, out]");

    if (listBackends().includes("llama_cpp")) assertClose(await promptLogits(baseGguf, { backend: "llama_cpp", adapterPath: out }), 0.999, "llama_cpp");
    assertClose(await promptLogits(baseGguf, { backend: "wasm", adapterPath: out }), 0.9999, "wasm, GGUF adapter on the GGUF base");
    // The PEFT folder on the GGUF base: q's B rows permuted at load as the converter permuted q's weight.
    assertClose(await promptLogits(baseGguf, { backend: "wasm", adapterPath: peftAdapter }), 0.9999, "wasm, PEFT adapter on the GGUF base");
    // And the GGUF adapter back on the Hugging Face base.
    assertClose(await promptLogits(folder, { backend: "wasm", adapterPath: out }), 0.9999, "wasm, GGUF adapter on the HF base");
  });

  test("merge bakes the adapter into a folder and into GGUF files, F32 exactly, Q8_0 re-encoded", async () => {
    const mergedFolder = join(dir, "merged-hf");
    const hf = await runCli(["merge", folder, peftAdapter, mergedFolder]);
    assert.equal(hf.code, 0, hf.stderr);
    assert.match(hf.stderr, /merged the adapter into 4 matrices \(safetensors\)\n$/);
    assertClose(await promptLogits(mergedFolder, { backend: "wasm" }), 0.9999, "merged HF folder");

    const mergedGguf = join(dir, "merged.gguf");
    const gguf = await runCli(["merge", baseGguf, peftAdapter, mergedGguf]);
    assert.equal(gguf.code, 0, gguf.stderr);
    assertClose(await promptLogits(mergedGguf, { backend: "wasm" }), 0.9999, "merged GGUF, wasm");
    if (listBackends().includes("llama_cpp")) assertClose(await promptLogits(mergedGguf, { backend: "llama_cpp" }), 0.999, "merged GGUF, llama_cpp");

    const q8 = join(dir, "tiny-q8.gguf");
    await convertHfToGguf(folder, q8, "q8_0");
    const mergedQ8 = join(dir, "merged-q8.gguf");
    const quantized = await runCli(["merge", q8, join(dir, "adapter.gguf"), mergedQ8]);
    assert.equal(quantized.code, 0, quantized.stderr);
    assert.match(quantized.stderr, /dequantized and re-encoded as Q8_0/);
    // Against the adapter applied on the same Q8_0 base: what merging changed is only the second rounding.
    const applied = await promptLogits(q8, { backend: "wasm", adapterPath: peftAdapter });
    const merged = await promptLogits(mergedQ8, { backend: "wasm" });
    assert.ok(cosineSimilarity(applied, merged) >= 0.999, `Q8_0 merge: cosine ${cosineSimilarity(applied, merged)}`);
  });

  test("infer run --adapter generates what the model loaded with adapterPath generates", async () => {
    const prompt = "Once upon a time, there was a little dog named";
    const run = async (model: string, ...extra: string[]) => {
      const result = await runCli(["run", model, prompt, "-n", "12", "-t", "0", "--threads", "1", ...extra]);
      assert.equal(result.code, 0, result.stderr);
      return result.stdout;
    };
    const adapted = await loadModel(folder, { backend: "wasm", threads: 1, adapterPath: peftAdapter });
    let expectedText: string;
    try {
      expectedText = (await adapted.generateText(prompt, { temperature: 0, maxTokens: 12 })).text;
    } finally {
      await adapted.close();
    }
    const withAdapter = await run(folder, "--adapter", peftAdapter);
    assert.equal(withAdapter, `${expectedText}\n`);
    assert.notEqual(withAdapter, await run(folder), "the adapter changes the greedy text");
    // A GGUF model with a PEFT folder goes to wasm when no backend is named: llama.cpp reads GGUF adapters only.
    assert.equal(await run(baseGguf, "--adapter", peftAdapter), withAdapter);
  });

  test("bad input: a missing adapter, no base for convert-lora, an adapter of another shape", async () => {
    const missing = await runCli(["merge", folder, join(dir, "nope"), join(dir, "x")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /MODEL_NOT_FOUND: .*nope/);
    const noBase = await runCli(["convert-lora", peftAdapter, join(dir, "x.gguf")]);
    assert.equal(noBase.code, 1);
    assert.match(noBase.stderr, /INVALID_OPTION: .*--base/);
    assert.equal(existsSync(join(dir, "x.gguf")), false);
    const other = await runCli(["merge", join(models, "stories260K", "stories260K.gguf"), peftAdapter, join(dir, "y.gguf")]);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /MODEL_FORMAT: .*tinystories-656k/);
    assert.equal(existsSync(join(dir, "y.gguf")), false);
  });
});
