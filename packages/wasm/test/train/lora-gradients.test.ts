/**
 * LoRA gradients of whole tiny random models against finite differences of
 * their loss, in float64: llama (GGUF, llama.cpp's permuted q/k and "normal"
 * RoPE; and over a Q8_0 base), qwen2 (biases), qwen3 (q/k norms; HF layout),
 * gemma3 (post-norms, GELU, sliding layers with their own RoPE base).
 * Each check perturbs entries of A and B of every adapted linear; B starts
 * nonzero so A's gradients are nonzero too.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgmlType } from "@infer/formats";
import { isInferenceError, loadTrainable, Rng } from "@infer/core";
import "../../src/index.js";
import { loadTransformer } from "../../src/load/load.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { writeRandomGguf, writeRandomHf, type RandomModelSpec } from "../../src/testing/index.js";
import { LoraTrainer, trainingGraph } from "../../src/train/lora-trainer.js";
import { lossAndGradients } from "../../src/train/llama-graph.js";
import { packBatch } from "../../src/train/pack-batch.js";
import { assertGradient, finiteDifferences } from "./gradcheck.js";

const SMALL = { hiddenSize: 32, numHeads: 4, numKVHeads: 2, ffnSize: 64, numLayers: 2 };
const BATCH = {
  inputIds: [
    [1, 72, 101, 108, 108, 111, 33],
    [1, 87, 111, 114],
  ],
  lossMask: [
    [1, 1, 1, 1, 1, 1, 1],
    [1, 1, 0, 1],
  ],
};
const ALL_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

interface Case {
  name: string;
  spec: RandomModelSpec;
  layout: "gguf" | "hf";
  type?: GgmlType;
  dropout?: number;
}

const CASES: Case[] = [
  { name: "llama (GGUF)", spec: { architecture: "llama", seed: 3, ...SMALL }, layout: "gguf" },
  { name: "llama over a Q8_0 base, dropout 0.2", spec: { architecture: "llama", seed: 4, ...SMALL }, layout: "gguf", type: GgmlType.Q8_0, dropout: 0.2 },
  { name: "qwen2 (GGUF, biases)", spec: { architecture: "qwen2", seed: 5, ...SMALL }, layout: "gguf" },
  { name: "qwen3 (HF, q/k norms)", spec: { architecture: "qwen3", seed: 6, ...SMALL, headDim: 16 }, layout: "hf" },
  // Six layers: five sliding (a window of 4, shorter than the first example) and one global.
  { name: "gemma3 (HF, (1 + w) norms, post-norms, GELU)", spec: { architecture: "gemma3", seed: 7, ...SMALL, numLayers: 6, headDim: 16, slidingWindow: 4 }, layout: "hf" },
  { name: "gemma3 (GGUF)", spec: { architecture: "gemma3", seed: 8, ...SMALL, numLayers: 6, headDim: 16, slidingWindow: 4 }, layout: "gguf" },
];

describe("LoRA gradients of tiny random models against finite differences", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-lora-grad-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("gradient checkpointing (all blocks or within a budget) gives the same loss and gradients, dropout masks included", async () => {
    const path = join(dir, "checkpointing.gguf");
    await writeRandomGguf(path, { architecture: "qwen3", seed: 12, ...SMALL, numLayers: 3, headDim: 16 });
    const { transformer, format } = await loadTransformer(path, { kernels: referenceKernels });
    const run = (checkpoint: boolean | number | ((allBlocksBytes: number) => number)) => {
      const adapter = new LoraTrainer(transformer, format).apply({ rank: 2, alpha: 4, targetModules: ALL_MODULES, dropout: 0.3, seed: 4 });
      const fill = new Rng(1);
      for (const linear of adapter.linears) for (let i = 0; i < linear.b.length; i++) linear.b[i] = fill.nextFloat() - 0.5;
      const graph = { ...trainingGraph(transformer, adapter), rng: new Rng(2), checkpoint };
      const { sum } = lossAndGradients(graph, packBatch(BATCH, transformer.config.vocabSize), true);
      return { sum, grads: adapter.linears.flatMap((l) => [Array.from(l.gradA), Array.from(l.gradB)]) };
    };
    const kept = run(false);
    const recomputed = run(true);
    assert.equal(recomputed.sum, kept.sum);
    assert.deepEqual(recomputed.grads, kept.grads);
    assert.ok(kept.grads.some((g) => g.some((v) => v !== 0)));
    // Budgets in bytes that keep the first blocks' activations and recompute the rest.
    for (const budget of [3_000, 30_000, 300_000]) {
      const partly = run(budget);
      assert.equal(partly.sum, kept.sum, `budget ${budget}`);
      assert.deepEqual(partly.grads, kept.grads, `budget ${budget}`);
    }
    // A budget given as a share of what all blocks would keep: asked once, with three blocks' bytes.
    const asked: number[] = [];
    const shared = run((all) => (asked.push(all), all / 2));
    assert.equal(asked.length, 1);
    assert.ok(asked[0]! > 0 && asked[0]! % 3 === 0, `asked with ${asked[0]} bytes`);
    assert.equal(shared.sum, kept.sum);
    assert.deepEqual(shared.grads, kept.grads);
    await transformer.dispose();
  });

  it("the head's cross-entropy in chunks of rows gives the loss and gradients of one pass over all rows, on both kernels", async () => {
    const path = join(dir, "head-chunks.gguf");
    await writeRandomGguf(path, { architecture: "llama", seed: 13, ...SMALL });
    // The WebAssembly kernels run an F32 head on gemm, whose sums do not depend on the rows it is given.
    const wasm = await createWasmKernels({ threads: 2, minBytesPerThread: 0 });
    for (const kernels of [referenceKernels, wasm]) {
      const { transformer, format } = await loadTransformer(path, { kernels });
      const batch = packBatch(BATCH, transformer.config.vocabSize);
      const counted = batch.targets.filter((t) => t >= 0).length;
      const run = (headChunkRows: number) => {
        const adapter = new LoraTrainer(transformer, format).apply({ rank: 2, alpha: 4, targetModules: ALL_MODULES, seed: 4 });
        const fill = new Rng(1);
        for (const linear of adapter.linears) for (let i = 0; i < linear.b.length; i++) linear.b[i] = fill.nextFloat() - 0.5;
        const graph = { ...trainingGraph(transformer, adapter), headChunkRows };
        const { sum } = lossAndGradients(graph, batch, true);
        return { sum, grads: adapter.linears.flatMap((l) => [Array.from(l.gradA), Array.from(l.gradB)]) };
      };
      const whole = run(counted);
      assert.ok(whole.grads.some((g) => g.some((v) => v !== 0)));
      // One row at a time, and chunks that do not divide the rows (a shorter last chunk).
      for (const rows of [1, 4]) {
        const chunked = run(rows);
        const label = `${kernels.name}: chunks of ${rows} rows`;
        assert.equal(chunked.sum, whole.sum, label);
        assert.deepEqual(chunked.grads, whole.grads, label);
      }
      await transformer.dispose();
    }
    await wasm.dispose?.();
  });

  it("phi3 (fused qkv and gate/up projections) is not trainable: TRAINING_UNSUPPORTED", async () => {
    const path = join(dir, "phi3.gguf");
    await writeRandomGguf(path, { architecture: "phi3", seed: 1, ...SMALL });
    await assert.rejects(loadTrainable(path, { backend: "wasm", threads: 1 }), (error) => isInferenceError(error, "TRAINING_UNSUPPORTED"));
  });

  for (const c of CASES) {
    it(c.name, async () => {
      const path = join(dir, c.name.replace(/\W+/g, "-"));
      if (c.layout === "gguf") await writeRandomGguf(`${path}.gguf`, { ...c.spec, type: c.type });
      else await writeRandomHf(path, c.spec);
      const { transformer, format } = await loadTransformer(c.layout === "gguf" ? `${path}.gguf` : path, { kernels: referenceKernels });
      const adapter = new LoraTrainer(transformer, format).apply({ rank: 2, alpha: 3, targetModules: ALL_MODULES, dropout: c.dropout ?? 0, seed: 9 });
      const fill = new Rng(11);
      for (const linear of adapter.linears) for (let i = 0; i < linear.b.length; i++) linear.b[i] = (fill.nextFloat() * 2 - 1) * 0.2;
      const packed = packBatch(BATCH, transformer.config.vocabSize);
      // The same dropout masks in every evaluation: the rng restarts each time.
      const run = (backward: boolean) => {
        const graph = { ...trainingGraph(transformer, adapter, true), rng: new Rng(5) };
        const { sum, count } = lossAndGradients(graph, packed, backward);
        return sum / count;
      };
      for (const linear of adapter.linears) {
        linear.gradA.fill(0);
        linear.gradB.fill(0);
      }
      run(true);
      const pick = new Rng(13);
      for (const linear of adapter.linears) {
        const indices = (length: number) => Array.from({ length: 4 }, () => Math.floor(pick.nextFloat() * length));
        const ia = indices(linear.a.length);
        const ib = indices(linear.b.length);
        const label = `layer ${linear.layer} ${linear.module}`;
        assertGradient(`${label} A`, ia.map((i) => linear.gradA[i]!), finiteDifferences(linear.a, () => run(false), 1e-3, ia));
        assertGradient(`${label} B`, ib.map((i) => linear.gradB[i]!), finiteDifferences(linear.b, () => run(false), 1e-3, ib));
      }
      await transformer.dispose();
    });
  }
});
