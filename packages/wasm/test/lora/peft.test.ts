/**
 * PEFT adapters: one written by PEFT itself (scripts/reference/peft_adapter.py)
 * gives PEFT's logits through adapterPath, and ours, written back, reloads
 * with the same logits.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { loadModel, type TextModel } from "@infer/core";
import { cosineSimilarity } from "@infer/core/testing";
import { readSafetensors } from "@infer/formats/node";
import "../../src/index.js";
import { loadTransformer } from "../../src/load/load.js";
import { loraDeltas, peftFolderFiles, readLoraAdapter, readPeftFolder, writePeftFolder } from "../../src/lora/index.js";
import { skipWithoutSharedModels } from "../engine/helpers.js";
import { INFER_ADAPTER, lastLogits, PEFT_ADAPTER, type PeftLogits, readPeftCheck, readPeftLogits, TINYSTORIES } from "./fixtures.js";

const skip = skipWithoutSharedModels();

describe("PEFT adapters on tinystories-656k", { skip }, () => {
  let fixture: PeftLogits;
  let dir: string;
  before(async () => {
    fixture = await readPeftLogits();
    dir = await mkdtemp(join(tmpdir(), "infer-lora-peft-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("the engine without the adapter gives PyTorch's logits, and the adapter changes them", async () => {
    const { transformer } = await loadTransformer(TINYSTORIES);
    const base = lastLogits(transformer, fixture.inputIds);
    assert.ok(cosineSimilarity(base, fixture.baseLogits) >= 0.99999, `base cosine ${cosineSimilarity(base, fixture.baseLogits)}`);
    // Otherwise the checks below could pass with the adapter ignored.
    assert.ok(cosineSimilarity(fixture.baseLogits, fixture.adapterLogits) < 0.9999);
  });

  test("PEFT's own adapter, read and applied, gives PEFT's logits (cosine >= 0.9999)", async () => {
    const adapter = await readPeftFolder(PEFT_ADAPTER);
    assert.equal(adapter.rank, fixture.rank);
    assert.equal(adapter.alpha, fixture.alpha);
    assert.deepEqual(adapter.targetModules, fixture.targetModules);
    assert.equal(adapter.pairs.length, 4);
    const loaded = await loadTransformer(TINYSTORIES);
    loaded.transformer.lora = loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
    const logits = lastLogits(loaded.transformer, fixture.inputIds);
    const cosine = cosineSimilarity(logits, fixture.adapterLogits);
    assert.ok(cosine >= 0.9999, `cosine ${cosine}`);
  });

  test("loadModel with adapterPath (wasm kernels) gives PEFT's logits for the prompt", async () => {
    const base = await loadModel(TINYSTORIES, { backend: "wasm", threads: 2 });
    const adapted = await loadModel(TINYSTORIES, { backend: "wasm", threads: 2, adapterPath: PEFT_ADAPTER });
    try {
      assert.deepEqual(adapted.info().warnings ?? [], [], "the adapter names tinystories-656k: no base-model warning");
      const logitsOf = async (model: TextModel) => (await model.classify([fixture.prompt], { logits: true }))[0]!.logits!;
      const [withAdapter, without] = [await logitsOf(adapted), await logitsOf(base)];
      assert.ok(cosineSimilarity(withAdapter, fixture.adapterLogits) >= 0.9999, `cosine ${cosineSimilarity(withAdapter, fixture.adapterLogits)}`);
      assert.ok(cosineSimilarity(without, fixture.baseLogits) >= 0.9999);
      // Over a base re-encoded in Q8_0 at load the adapter attaches to the re-encoded matrices.
      const quantized = await loadModel(TINYSTORIES, { backend: "wasm", threads: 2, quantize: "q8_0", adapterPath: PEFT_ADAPTER });
      const q8 = await logitsOf(quantized).finally(() => quantized.close());
      assert.ok(cosineSimilarity(q8, fixture.adapterLogits) >= 0.999, `Q8_0 base: cosine ${cosineSimilarity(q8, fixture.adapterLogits)}`);
      assert.ok(cosineSimilarity(q8, fixture.adapterLogits) > cosineSimilarity(q8, fixture.baseLogits), "nearer the adapter's logits than the base's");
      // Greedy generation runs through the adapter too (decode steps, not only the prompt).
      const text = await adapted.generateText(fixture.prompt, { temperature: 0, maxTokens: 8 });
      assert.ok(text.tokens.length > 0);
    } finally {
      await Promise.all([base.close(), adapted.close()]);
    }
  });

  test("our writer's folder reloads with identical logits, and PEFT's names and settings", async () => {
    const adapter = await readPeftFolder(PEFT_ADAPTER);
    const out = join(dir, "written");
    await writePeftFolder(out, adapter);
    const config = JSON.parse(await readFile(join(out, "adapter_config.json"), "utf8")) as Record<string, unknown>;
    assert.equal(config.peft_type, "LORA");
    assert.equal(config.task_type, "CAUSAL_LM");
    assert.equal(config.r, 4);
    assert.equal(config.lora_alpha, 8);
    assert.equal(config.base_model_name_or_path, "tinystories-656k");
    assert.deepEqual(config.target_modules, ["q_proj", "v_proj"]);
    const written = await readSafetensors(join(out, "adapter_model.safetensors"));
    const original = await readSafetensors(join(PEFT_ADAPTER, "adapter_model.safetensors"));
    assert.deepEqual([...written.tensors.keys()].sort(), [...original.tensors.keys()].sort());
    for (const [name, tensor] of original.tensors) {
      assert.deepEqual(written.tensors.get(name)!.shape, tensor.shape, name);
      assert.deepEqual(written.tensors.get(name)!.data, tensor.data, name);
    }
    const run = async (path: string) => {
      const loaded = await loadTransformer(TINYSTORIES);
      const again = await readLoraAdapter(path);
      loaded.transformer.lora = loraDeltas(again, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
      return lastLogits(loaded.transformer, fixture.inputIds);
    };
    assert.deepEqual(await run(out), await run(PEFT_ADAPTER));
  });

  test("an adapter our trainer saved loads in PEFT without warnings, with our logits; our writer still writes it byte for byte", async () => {
    // PEFT's verdict is a fixture (peft_adapter.py --check-ours): CI has no torch. It holds for these bytes,
    // so the writer must still produce them; when it changes on purpose, the two reference scripts remake both.
    const peft = await readPeftCheck();
    assert.deepEqual(peft.warnings, [], "PEFT and transformers warned while loading it");
    assert.deepEqual(peft.inputIds, fixture.inputIds);
    const adapter = await readPeftFolder(INFER_ADAPTER);
    assert.deepEqual([...adapter.targetModules].sort(), ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]);
    assert.ok(adapter.pairs.every((pair) => pair.b.some((v) => v !== 0)), "every B was trained away from zero");
    for (const [name, bytes] of Object.entries(peftFolderFiles(adapter))) {
      assert.deepEqual(bytes, new Uint8Array(await readFile(join(INFER_ADAPTER, name))), `${name} as our writer writes it today`);
    }
    const loaded = await loadTransformer(TINYSTORIES);
    const base = lastLogits(loaded.transformer, fixture.inputIds);
    loaded.transformer.lora = loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
    const ours = lastLogits(loaded.transformer, fixture.inputIds);
    assert.ok(cosineSimilarity(ours, peft.logits) >= 0.9999, `cosine against PEFT ${cosineSimilarity(ours, peft.logits)}`);
    assert.ok(cosineSimilarity(base, peft.logits) < 0.9999, "the adapter changes the logits");
  });
});
