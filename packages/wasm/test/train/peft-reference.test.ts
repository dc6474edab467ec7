/**
 * Against PyTorch + PEFT (scripts/reference/peft_reference.py wrote the
 * fixture): on tinystories-656k with a fixed initial adapter, the loss of a
 * fixed batch (relative 1e-5), the LoRA gradients (cosine >= 0.9999 per
 * adapted linear) and the loss after one AdamW step.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadTransformer } from "../../src/load/load.js";
import { referenceKernels } from "../../src/kernels/reference.js";
import { LORA_TARGET_MODULES } from "@infer/core";
import { LoraTrainer } from "../../src/train/lora-trainer.js";

const model = fileURLToPath(new URL("../../../../../../shared/models/tinystories-656k", import.meta.url));
const fixturePath = fileURLToPath(new URL("../../../test/fixtures/train/tinystories-peft-step.json", import.meta.url));

interface Fixture {
  rank: number;
  alpha: number;
  targetModules: string[];
  learningRate: number;
  inputIds: number[][];
  lossMask: number[][];
  loss: number;
  lossAfterStep: number;
  gradients: Record<string, { A: number[]; B: number[] }>;
}

/** The script's initial_values: scale · sin(1.3 i + 0.7 layer + module index + phase). */
function initialValues(out: Float32Array, layer: number, module: string, scale: number, phase: number): void {
  const m = (LORA_TARGET_MODULES as readonly string[]).indexOf(module);
  for (let i = 0; i < out.length; i++) out[i] = scale * Math.sin(1.3 * i + 0.7 * layer + m + phase);
}

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! ** 2;
    bb += b[i]! ** 2;
  }
  return ab / Math.sqrt(aa * bb);
}

describe("LoRA training against PyTorch + PEFT on tinystories-656k", { skip: existsSync(model) ? false : `no model at ${model}` }, () => {
  it("gives PEFT's loss, gradients and loss after one AdamW step", async () => {
    const fixture = JSON.parse(readFileSync(fixturePath, "utf8")) as Fixture;
    const { transformer, format } = await loadTransformer(model, { kernels: referenceKernels });
    const trainer = new LoraTrainer(transformer, format);
    const adapter = trainer.apply({ rank: fixture.rank, alpha: fixture.alpha, targetModules: fixture.targetModules });
    for (const linear of adapter.linears) {
      initialValues(linear.a, linear.layer, linear.module, 1 / Math.sqrt(linear.inFeatures), 0);
      initialValues(linear.b, linear.layer, linear.module, 0.01, 0.5);
    }
    const batch = { inputIds: fixture.inputIds, lossMask: fixture.lossMask };
    const { loss, tokens } = trainer.step(batch, { learningRate: fixture.learningRate });
    const counted = fixture.lossMask.reduce((sum, mask) => sum + mask.slice(1).filter((m) => m !== 0).length, 0);
    assert.equal(tokens, counted);
    const lossError = Math.abs(loss - fixture.loss) / fixture.loss;
    assert.ok(lossError < 1e-5, `loss ${loss} vs PEFT's ${fixture.loss}: relative ${lossError.toExponential(2)}`);

    assert.equal(adapter.linears.length, Object.keys(fixture.gradients).length);
    for (const linear of adapter.linears) {
      const expected = fixture.gradients[`${linear.layer}.${linear.module}`];
      assert.ok(expected, `PEFT has no gradients for ${linear.layer}.${linear.module}`);
      for (const [half, ours, theirs] of [["A", linear.gradA, expected.A], ["B", linear.gradB, expected.B]] as const) {
        assert.equal(ours.length, theirs.length);
        const c = cosine(ours, theirs);
        assert.ok(c >= 0.9999, `layer ${linear.layer} ${linear.module} ${half}: cosine ${c}`);
      }
    }
    const after = trainer.loss(batch).loss;
    const afterError = Math.abs(after - fixture.lossAfterStep) / fixture.lossAfterStep;
    assert.ok(afterError < 1e-4, `loss after one step ${after} vs PEFT's ${fixture.lossAfterStep}: relative ${afterError.toExponential(2)}`);
    assert.ok(after < loss, "one step lowers the batch's loss");
    await transformer.dispose();
  });
});
