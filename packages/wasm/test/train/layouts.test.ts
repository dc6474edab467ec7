/**
 * The same random llama as a Hugging Face folder and as a GGUF file (whose
 * q/k rows llama.cpp's converter permutes for its "normal" RoPE) trains the
 * same: equal losses step by step, and saved PEFT folders with the same
 * tensors (the GGUF adapter's q/k B rows moved back to Hugging Face order).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTransformer } from "../../src/load/load.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import { readPeftFolder } from "../../src/lora/index.js";
import { writeRandomGguf, writeRandomHf, type RandomModelSpec } from "../../src/testing/index.js";
import { LoraTrainer } from "../../src/train/lora-trainer.js";
import { relativeError } from "./gradcheck.js";

const SPEC: RandomModelSpec = { architecture: "llama", seed: 31, hiddenSize: 32, numHeads: 4, numKVHeads: 2, ffnSize: 64 };
const BATCH = { inputIds: [[1, 72, 101, 108, 108, 111, 33, 40], [1, 87, 111, 114, 100]] };

test("a GGUF llama and its Hugging Face folder train alike and save the same PEFT adapter", async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-train-layouts-"));
  try {
    await writeRandomHf(join(dir, "hf"), SPEC);
    await writeRandomGguf(join(dir, "model.gguf"), SPEC);
    const runs = [];
    for (const path of [join(dir, "hf"), join(dir, "model.gguf")]) {
      const { transformer, format } = await loadTransformer(path, { kernels: referenceKernels });
      const trainer = new LoraTrainer(transformer, format);
      const adapter = trainer.apply({ rank: 2, alpha: 4, targetModules: ["q_proj", "k_proj", "v_proj"], seed: 5 });
      const losses: number[] = [];
      for (let step = 0; step < 3; step++) losses.push(trainer.step(BATCH, { learningRate: 1e-2 }).loss);
      const saved = join(dir, `adapter-${format}`);
      await adapter.save(saved);
      runs.push({ losses, adapter: await readPeftFolder(saved) });
      await transformer.dispose();
    }
    const [hf, gguf] = runs as [(typeof runs)[0], (typeof runs)[0]];
    hf.losses.forEach((loss, i) => assert.ok(Math.abs(loss - gguf.losses[i]!) < 1e-5 * loss, `step ${i + 1}: ${loss} vs ${gguf.losses[i]}`));
    assert.ok(hf.losses[2]! < hf.losses[0]!);
    assert.equal(gguf.adapter.pairs.length, hf.adapter.pairs.length);
    for (const pair of hf.adapter.pairs) {
      const other = gguf.adapter.pairs.find((p) => p.layer === pair.layer && p.module === pair.module)!;
      assert.ok(relativeError(pair.a, other.a) < 1e-4, `layer ${pair.layer} ${pair.module} A`);
      assert.ok(relativeError(pair.b, other.b) < 1e-4, `layer ${pair.layer} ${pair.module} B: ${relativeError(pair.b, other.b)}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
