/**
 * Training on the WebAssembly kernels (the forward's matmuls, and the
 * backward's over float bases) at 1 to 4 threads against the TypeScript
 * reference kernels: the same loss and the same LoRA gradients, over F32 and
 * Q8_0 bases (whose activations the kernels quantize to int8, as in inference).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgmlType } from "@infer/formats";
import { Rng } from "@infer/core";
import { loadTransformer } from "../../src/load/load.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import type { Kernels } from "../../src/kernels/types.js";
import { writeRandomGguf } from "../../src/testing/index.js";
import { LoraTrainer } from "../../src/train/lora-trainer.js";
import { relativeError } from "./gradcheck.js";

const BATCH = { inputIds: [[1, 72, 101, 108, 108, 111, 33, 40, 41, 50, 51], [1, 87, 111, 114, 100]] };
const MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

async function gradients(path: string, kernels: Kernels): Promise<{ loss: number; grads: Float32Array[] }> {
  const { transformer, format } = await loadTransformer(path, { kernels });
  try {
    const trainer = new LoraTrainer(transformer, format);
    const adapter = trainer.apply({ rank: 4, alpha: 8, targetModules: MODULES, seed: 2 });
    const fill = new Rng(3);
    for (const linear of adapter.linears) for (let i = 0; i < linear.b.length; i++) linear.b[i] = (fill.nextFloat() * 2 - 1) * 0.1;
    const { loss } = trainer.step(BATCH, { learningRate: 0 });
    return { loss, grads: adapter.linears.flatMap((l) => [l.gradA.slice(), l.gradB.slice()]) };
  } finally {
    transformer.releaseMemory();
  }
}

describe("training on the WebAssembly kernels matches the reference kernels", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-train-wasm-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const [type, lossBound, gradBound] of [[GgmlType.F32, 1e-6, 1e-5], [GgmlType.Q8_0, 1e-3, 2e-2]] as const) {
    it(`${GgmlType[type]} base, 1 to 4 threads`, async () => {
      const path = join(dir, `llama-${type}.gguf`);
      await writeRandomGguf(path, { architecture: "llama", seed: 8, hiddenSize: 64, ffnSize: 128, type });
      const expected = await gradients(path, referenceKernels);
      for (const threads of [1, 2, 3, 4]) {
        const kernels = await createWasmKernels({ threads });
        try {
          const got = await gradients(path, kernels);
          const lossError = Math.abs(got.loss - expected.loss) / expected.loss;
          assert.ok(lossError < lossBound, `${threads} threads: loss ${got.loss} vs ${expected.loss}`);
          got.grads.forEach((g, i) => {
            const error = relativeError(g, expected.grads[i]!);
            assert.ok(error < gradBound, `${threads} threads: gradient ${i} relative error ${error.toExponential(2)}`);
          });
        } finally {
          await kernels.dispose?.();
        }
      }
    });
  }
});
