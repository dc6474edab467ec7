/**
 * The training loop (@infer/core's train) over the wasm engine on a tiny
 * random llama: resume from a checkpoint continues bit-identically, gradient
 * accumulation equals one big batch, clipping bounds the update, probes see
 * every step, abort stops with the checkpoint intact, divergence names its
 * step, empty data is refused.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  isInferenceError,
  loadTrainable,
  Rng,
  scheduledLearningRate,
  train,
  type ProbeEvent,
  type TrainableModel,
  type TrainExample,
  type TrainOptions,
} from "@infer/core";
import { checkpointDirectory } from "@infer/core/node";
import "../../src/index.js";
import { writeRandomHf } from "../../src/testing/index.js";

const LORA = { rank: 2, alpha: 4, targetModules: ["q_proj", "v_proj"], seed: 3, dropout: 0.1 };

function examples(count: number, seed: number): TrainExample[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => {
    const length = 4 + (rng.nextUint32() % 6);
    const inputIds = Array.from({ length }, () => 1 + (rng.nextUint32() % 200));
    return { inputIds, lossMask: inputIds.map((_, t) => (t === 1 ? 0 : 1)) };
  });
}

const DATA = examples(10, 1);
const EVAL = examples(3, 2);

describe("train() over the wasm engine", () => {
  let dir: string;
  let modelPath: string;
  const open: TrainableModel[] = [];
  const load = async (dropout = LORA.dropout) => {
    const model = await loadTrainable(modelPath, { backend: "wasm", threads: 1 });
    open.push(model);
    model.applyLoRA({ ...LORA, dropout });
    return model;
  };
  const weights = (model: TrainableModel) => model.trainingState().tensors.filter((t) => !t.name.includes("exp_avg"));

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-train-loop-"));
    modelPath = join(dir, "model");
    await writeRandomHf(modelPath, { architecture: "llama", seed: 7, hiddenSize: 32, numHeads: 4, numKVHeads: 2, ffnSize: 64, numLayers: 2 });
  });
  after(async () => {
    for (const model of open) await model.close();
    await rm(dir, { recursive: true, force: true });
  });

  const OPTIONS: TrainOptions = { epochs: 2, batchSize: 2, gradientAccumulation: 2, learningRate: 5e-2, warmupSteps: 2, seed: 4, maxGradNorm: 0.5 };

  it("N steps straight equal N/2, a checkpoint, a fresh model resuming, and N/2 more, bit for bit", async () => {
    const straight = await load();
    const events: ProbeEvent[] = [];
    const whole = await train(straight, DATA, { ...OPTIONS, evalExamples: EVAL, evalEvery: 2, probes: (e) => events.push(e) });
    assert.equal(whole.totalSteps, 6); // 2 epochs × ceil(10 / 4)
    assert.equal(whole.steps, 6);
    assert.equal(events.length, 6);
    for (const [i, event] of events.entries()) {
      assert.equal(event.kind, "training");
      assert.equal(event.phase, "training");
      if (event.kind !== "training") continue;
      assert.equal(event.payload.step, i + 1);
      assert.equal(event.payload.loss, whole.history[i]!.loss);
      assert.equal(event.payload.learningRate, scheduledLearningRate(i, 6, 5e-2, 2, "cosine"));
      assert.ok(event.payload.gradNorm! > 0 && Number.isFinite(event.payload.gradNorm));
      assert.ok(event.payload.tokensPerSecond! > 0);
    }
    assert.deepEqual(whole.history.filter((h) => h.evalLoss !== undefined).map((h) => h.step), [2, 4, 6]);
    assert.equal(whole.finalEvalLoss, whole.history[5]!.evalLoss);

    const store = checkpointDirectory(join(dir, "resume"));
    const controller = new AbortController();
    const first = await load();
    const half = await train(first, DATA, {
      ...OPTIONS,
      evalExamples: EVAL,
      evalEvery: 2,
      checkpoints: store,
      checkpointEvery: 2,
      signal: controller.signal,
      onStep: (progress) => {
        if (progress.step === 3) controller.abort();
      },
    });
    assert.equal(half.aborted, true);
    assert.equal(half.steps, 3);
    const saved = await store.load();
    assert.equal(saved?.trainer.step, 3, "abort writes a checkpoint after the step in progress");

    const resumed = await load();
    const rest = await train(resumed, DATA, { ...OPTIONS, evalExamples: EVAL, evalEvery: 2, checkpoints: store, checkpointEvery: 2, resume: true });
    assert.equal(rest.resumedFrom, 3);
    assert.equal(rest.steps, 6);
    assert.deepEqual(rest.history, whole.history);
    assert.deepEqual(weights(resumed), weights(straight));
    assert.deepEqual(resumed.trainingState(), straight.trainingState());
    assert.equal((await store.load())?.trainer.step, 6);
  });

  it("a resume with other options is refused", async () => {
    const store = checkpointDirectory(join(dir, "other"));
    await train(await load(), DATA, { ...OPTIONS, epochs: 1, checkpoints: store, checkpointEvery: 1 });
    await assert.rejects(train(await load(), DATA, { ...OPTIONS, checkpoints: store, resume: true }), (error) =>
      isInferenceError(error, "INVALID_OPTION") && /other data or options/.test((error as Error).message),
    );
  });

  it("gradient accumulation gives the step of the whole batch", async () => {
    // Without dropout: its masks are drawn per group, so they differ from one pass's.
    const batch = { inputIds: DATA.slice(0, 4).map((e) => e.inputIds) };
    const one = await load(0);
    const four = await load(0);
    const a = await one.trainStep(batch, { learningRate: 1e-2 });
    const b = await four.trainStep(batch, { learningRate: 1e-2, microBatches: 4 });
    assert.equal(a.tokens, b.tokens);
    assert.ok(Math.abs(a.loss - b.loss) < 1e-6 * a.loss);
    assert.ok(Math.abs(a.gradNorm! - b.gradNorm!) < 1e-4 * a.gradNorm!, `${a.gradNorm} vs ${b.gradNorm}`);
  });

  it("clipping scales the gradient down to maxGradNorm", async () => {
    // With a huge eps, AdamW's first update is about -lr · g / eps: linear in the gradient, so it shows the scaling.
    const batch = { inputIds: DATA.slice(0, 2).map((e) => e.inputIds) };
    const step = { learningRate: 1, eps: 1e3 };
    const free = await load(0);
    const clipped = await load(0);
    const start = weights(free);
    const { gradNorm } = await free.trainStep(batch, step);
    const limited = await clipped.trainStep(batch, { ...step, maxGradNorm: gradNorm! / 4 });
    assert.equal(limited.gradNorm, gradNorm, "the reported norm is the one before clipping");
    const [fullDelta, clippedDelta] = [weights(free), weights(clipped)].map((w) => w.flatMap((t, i) => Array.from(t.values, (v, k) => v - start[i]!.values[k]!)));
    const moved = fullDelta!.map((d, k) => [d, clippedDelta![k]!] as const).filter(([d]) => Math.abs(d) > 1e-9);
    assert.ok(moved.length > 0);
    for (const [d, c] of moved) assert.ok(Math.abs(c - d / 4) <= 1e-3 * Math.abs(d), `${c} vs ${d} / 4`);
  });

  it("a diverging step fails with TRAINING_DIVERGED naming it; the checkpoint before it stays", async () => {
    const store = checkpointDirectory(join(dir, "diverge"));
    const model = await load();
    let diverged: unknown;
    await assert.rejects(
      train(model, DATA, { batchSize: 4, learningRate: 1e30, maxGradNorm: 0, schedule: "constant", checkpoints: store, checkpointEvery: 1 }),
      (error) => {
        diverged = error;
        return isInferenceError(error, "TRAINING_DIVERGED") && /checkpoint is kept/.test((error as Error).message);
      },
    );
    const step = (diverged as { details: { step: number } }).details.step;
    assert.match((diverged as Error).message, new RegExp(`diverged at step ${step} of 3`));
    assert.equal((await store.load())?.trainer.step, step - 1, "the checkpoint of the step before stays");
    assert.ok((await stat(store.path)).size > 0);
    assert.ok((await readFile(store.path)).length > 0);
  });

  it("empty or target-less data and bad options are refused with INVALID_OPTION", async () => {
    const model = await load();
    const refused = (promise: Promise<unknown>, pattern: RegExp) =>
      assert.rejects(promise, (error) => isInferenceError(error, "INVALID_OPTION") && pattern.test((error as Error).message));
    await refused(train(model, []), /dataset is empty/);
    await refused(train(model, [{ inputIds: [5] }]), /at least two tokens/);
    await refused(train(model, DATA, { evalExamples: [] }), /evalExamples/);
    await refused(train(model, DATA, { epochs: 0 }), /epochs/);
    await refused(train(model, DATA, { checkpointEvery: 1 }), /checkpoint store/);
    assert.equal(model.trainingState().steps, 0, "refused runs take no step");
  });
});
