/**
 * RoPE variants that need their own metadata or tensors, cross-checked with
 * llama.cpp (F32, so the float tolerance applies), and the sensitivity of
 * the comparison itself: small deliberate changes to the model llama.cpp runs
 * must fail the tolerances the other tests pass with.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { Llama } from "node-llama-cpp";
import { GgufValueType, type GgufValueInput, GgmlType } from "@infer/formats";
import { writeRandomGguf, type RandomGgufSpec } from "../../src/testing/index.js";
import { assertLogitsClose, floatArithmetic, toleranceFor } from "./compare.js";
import { loadOurs, runEngine } from "./cross-check.js";
import { writeLlamaCppCopy } from "./gguf-copies.js";
import { closeLlama, LlamaOracle, openLlama } from "./llama-oracle.js";
import { crossCheckRandomModel, RANDOM_RUN, withTempFolder } from "./random-models.js";

const llama = await openLlama();
after(closeLlama);

describe("RoPE variants vs llama.cpp", { skip: typeof llama === "string" ? llama : false }, () => {

  it("llama with Llama 3.1 RoPE scaling (rope_freqs.weight)", (t) =>
    crossCheckRandomModel(t, llama as Llama, {
      architecture: "llama",
      seed: 7,
      llama3RopeScaling: { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 16 },
    }));

  it("phi3 with LongRoPE, context beyond the original: long factors and the attention factor", (t) =>
    crossCheckRandomModel(t, llama as Llama, { architecture: "phi3", seed: 7, longRope: { originalContextLength: 32 } }));

  // llama.cpp rounds every context up to a multiple of 256 and picks the factors by that,
  // so the short-factor case needs an original context of 256 or more.
  it("phi3 with LongRoPE, context within the original: short factors and the attention factor", (t) =>
    crossCheckRandomModel(
      t,
      llama as Llama,
      { architecture: "phi3", seed: 7, contextLength: 512, longRope: { originalContextLength: 256 } },
      { ...RANDOM_RUN, contextLength: 256 },
    ));
});

describe("the comparison notices small differences", { skip: typeof llama === "string" ? llama : false }, () => {
  const spec: RandomGgufSpec = { architecture: "llama", seed: 7 };
  const f32 = (value: number): GgufValueInput => ({ type: GgufValueType.FLOAT32, value });

  /** Our logits for the model, and llama.cpp's for a copy of it with `metadata` changed (or `otherSeed`'s weights). */
  async function logitPairs(change: { metadata?: Record<string, GgufValueInput>; otherSeed?: number }) {
    return withTempFolder(async (dir) => {
      const path = join(dir, "model.gguf");
      await writeRandomGguf(path, spec);
      const model = await loadOurs(path, RANDOM_RUN.contextLength);
      const ours = await runEngine(model, RANDOM_RUN).finally(() => model.close());
      const altered = join(dir, "altered.gguf");
      if (change.otherSeed !== undefined) await writeRandomGguf(altered, { ...spec, seed: change.otherSeed });
      else await writeLlamaCppCopy(path, altered, { dequantize: false, metadata: change.metadata });
      const oracle = await LlamaOracle.open(llama as Llama, altered, RANDOM_RUN.contextLength);
      assert.ok(typeof oracle !== "string", String(oracle));
      try {
        const pairs: { ours: Float32Array; theirs: Float32Array }[] = [];
        // One at a time: the oracle has one sequence.
        for (const [i, ids] of ours.ids.entries()) pairs.push({ ours: ours.logits[i]!, theirs: await oracle.lastLogits(ids) });
        return pairs;
      } finally {
        await oracle.close();
      }
    });
  }

  it("RoPE base 1% off fails the float tolerance", async () => {
    for (const { ours, theirs } of await logitPairs({ metadata: { "llama.rope.freq_base": f32(10100) } })) {
      assert.throws(() => assertLogitsClose(ours, theirs, floatArithmetic("llama"), "rope base"), /spread/);
    }
  });

  it("RMS norm epsilon 1e-3 instead of 1e-5 fails the float tolerance", async () => {
    for (const { ours, theirs } of await logitPairs({ metadata: { "llama.attention.layer_norm_rms_epsilon": f32(1e-3) } })) {
      assert.throws(() => assertLogitsClose(ours, theirs, floatArithmetic("llama"), "rms epsilon"), /spread/);
    }
  });

  it("other weights fail even the quantized tolerance (cosine far below 0.999)", async () => {
    for (const { ours, theirs } of await logitPairs({ otherSeed: 8 })) {
      assert.throws(() => assertLogitsClose(ours, theirs, toleranceFor(GgmlType.Q4_0, "llama"), "other seed"), /cosine/);
    }
  });
});
