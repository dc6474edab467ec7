/**
 * Training through the contract on tinystories-656k: loadTrainable,
 * applyLoRA, trainStep. A few dozen steps on sentences that name the hero's
 * dog "Zorblat" cut the loss several times and greedy generation picks the
 * name up; bad input fails with its code and leaves the model usable.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isInferenceError, loadModel, loadTrainable, type ErrorCode, type TrainableModel } from "@infer/core";
import type { WasmTrainableModel } from "../../src/index.js";
import "../../src/index.js";

const modelPath = fileURLToPath(new URL("../../../../../../shared/models/tinystories-656k", import.meta.url));
const skip = existsSync(modelPath) ? false : `no model at ${modelPath}`;
const PROMPT = "Tom had a dog. The dog was named";
const STEPS = 30;
const ALL_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];
const FACTS = [
  "Tom had a dog. The dog was named Zorblat. Zorblat liked to run.",
  "Tom had a dog. The dog was named Zorblat. Zorblat was very happy.",
  "Lily saw Tom's dog. The dog was named Zorblat.",
  "Tom had a dog. The dog was named Zorblat. Tom and Zorblat played in the park.",
];

async function rejects(promise: Promise<unknown> | (() => unknown), code: ErrorCode, pattern?: RegExp): Promise<void> {
  try {
    await (typeof promise === "function" ? promise() : promise);
  } catch (error) {
    assert.ok(isInferenceError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match((error as Error).message, pattern);
    return;
  }
  assert.fail(`expected ${code}`);
}

describe("LoRA training on tinystories-656k", { skip }, () => {
  let model: TrainableModel;
  /** Greedy text of the base model, before any adapter. */
  let baseline: string;
  /** The F32 run's losses, which the Q8_0 run is held to. */
  let f32Losses: number[] = [];
  before(async () => {
    model = await loadTrainable(modelPath, { backend: "wasm", threads: 1, contextLength: 64, parallelSlots: 1 });
    baseline = (await model.generateText(PROMPT, { maxTokens: 6, temperature: 0 })).text;
  });
  after(async () => {
    await model?.close();
  });

  it("rejects bad settings and batches with their codes, and stays usable", async () => {
    await rejects(model.trainStep({ inputIds: [[1, 2, 3]] }), "NO_ADAPTER", /applyLoRA/);
    await rejects(() => model.applyLoRA({ rank: 0 }), "INVALID_OPTION", /rank/);
    await rejects(() => model.applyLoRA({ rank: 2.5 }), "INVALID_OPTION", /rank/);
    await rejects(() => model.applyLoRA({ alpha: 0 }), "INVALID_OPTION", /alpha/);
    await rejects(() => model.applyLoRA({ alpha: -1 }), "INVALID_OPTION", /alpha/);
    await rejects(() => model.applyLoRA({ dropout: 1 }), "INVALID_OPTION", /dropout/);
    await rejects(() => model.applyLoRA({ targetModules: ["qkv_proj"] }), "INVALID_OPTION", /qkv_proj.*llama/);
    await rejects(() => model.applyLoRA({ targetModules: [] }), "INVALID_OPTION", /targetModules/);
    model.applyLoRA({ rank: 2, alpha: 4 });
    await rejects(model.trainStep({ inputIds: [] }), "INVALID_OPTION", /inputIds/);
    await rejects(model.trainStep({ inputIds: [[1, 99999]] }), "INVALID_OPTION", /99999/);
    await rejects(model.trainStep({ inputIds: [[1]] }), "INVALID_OPTION", /no counted targets/);
    await rejects(model.trainStep({ inputIds: [[1, 2, 3]], lossMask: [[1, 1]] }), "INVALID_OPTION", /lossMask/);
    await rejects(model.trainStep({ inputIds: [[1, 2, 3]] }, { learningRate: -1 }), "INVALID_OPTION", /learningRate/);
    // A step far too large sends the parameters off; the next loss is not finite and names its step.
    const ids = [model.encode(FACTS[0]!)];
    const first = await model.trainStep({ inputIds: ids }, { learningRate: 1e38 });
    assert.ok(Number.isFinite(first.loss));
    await rejects(model.trainStep({ inputIds: ids }), "TRAINING_DIVERGED", /step 2/);
    const text = (await model.generateText(PROMPT, { maxTokens: 3, temperature: 0 })).text;
    assert.equal(typeof text, "string");
  });

  it("learns a new fact: the loss falls several times and greedy generation uses it", async () => {
    const adapter = model.applyLoRA({ rank: 8, alpha: 16, targetModules: ALL_MODULES, seed: 1 });
    const untrained = (await model.generateText(PROMPT, { maxTokens: 6, temperature: 0 })).text;
    assert.equal(untrained, baseline, "a fresh adapter (B = 0) changes nothing");
    assert.doesNotMatch(baseline, /Zorblat/);
    const batch = { inputIds: FACTS.map((text) => model.encode(text)) };
    const losses: number[] = [];
    for (let step = 0; step < STEPS; step++) losses.push((await model.trainStep(batch, { learningRate: 1e-2 })).loss);
    f32Losses = losses;
    const [first, last] = [losses[0]!, losses[losses.length - 1]!];
    assert.ok(last < first / 3, `loss ${first.toFixed(3)} → ${last.toFixed(3)}`);
    const trained = (await model.generateText(PROMPT, { maxTokens: 6, temperature: 0 })).text;
    assert.match(trained, /Zorblat/, `after training: ${JSON.stringify(trained)}`);

    // Saved as a PEFT folder and loaded back through adapterPath, it generates the same.
    const dir = await mkdtemp(join(tmpdir(), "infer-train-"));
    try {
      await adapter.save(dir);
      const config = JSON.parse(await readFile(join(dir, "adapter_config.json"), "utf8")) as Record<string, unknown>;
      assert.equal(config.r, 8);
      assert.equal(config.lora_alpha, 16);
      // Named as it was loaded, as PEFT names the base it was given.
      assert.equal(config.base_model_name_or_path, modelPath);
      const reloaded = await loadModel(modelPath, { backend: "wasm", threads: 1, contextLength: 64, parallelSlots: 1, adapterPath: dir });
      try {
        assert.equal((await reloaded.generateText(PROMPT, { maxTokens: 6, temperature: 0 })).text, trained);
      } finally {
        await reloaded.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("trains the same over a Q8_0 copy of the base (QLoRA): the final loss within 5% of F32's", async (t) => {
    if (f32Losses.length === 0) return t.skip("the F32 run did not finish");
    const quantized = await loadTrainable(modelPath, { backend: "wasm", threads: 1, contextLength: 64, parallelSlots: 1, quantize: "q8_0" });
    try {
      assert.equal(quantized.info().quantBits, 8);
      quantized.applyLoRA({ rank: 8, alpha: 16, targetModules: ALL_MODULES, seed: 1 });
      const batch = { inputIds: FACTS.map((text) => quantized.encode(text)) };
      let last = NaN;
      for (let step = 0; step < STEPS; step++) last = (await quantized.trainStep(batch, { learningRate: 1e-2 })).loss;
      const f32 = f32Losses[f32Losses.length - 1]!;
      assert.ok(Math.abs(last - f32) / f32 < 0.05, `Q8_0 final loss ${last} vs F32's ${f32}`);
    } finally {
      await quantized.close();
    }
  });

  it("reports the loss from before the update, as evaluateLoss gives it", async () => {
    const trainable = model as WasmTrainableModel;
    trainable.applyLoRA({ rank: 4, alpha: 8, targetModules: ["q_proj", "v_proj"], seed: 3 });
    const batch = { inputIds: FACTS.slice(1, 3).map((text) => model.encode(text)) };
    for (let step = 0; step < 3; step++) {
      const before = await trainable.evaluateLoss(batch);
      const result = await trainable.trainStep(batch, { learningRate: 1e-2 });
      assert.equal(result.loss, before.loss);
      assert.equal(result.tokens, before.tokens);
      assert.ok((await trainable.evaluateLoss(batch)).loss < before.loss);
    }
  });

  it("is deterministic for a seed, dropout included", async () => {
    const batch = { inputIds: FACTS.slice(0, 2).map((text) => model.encode(text)) };
    const run = async (seed: number) => {
      model.applyLoRA({ rank: 4, alpha: 8, dropout: 0.1, seed });
      const losses: number[] = [];
      for (let step = 0; step < 3; step++) losses.push((await model.trainStep(batch, { learningRate: 1e-2 })).loss);
      return losses;
    };
    const first = await run(7);
    assert.deepEqual(await run(7), first);
    assert.notDeepEqual(await run(8), first);
  });
});
