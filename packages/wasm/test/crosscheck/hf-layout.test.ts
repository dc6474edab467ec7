/**
 * Hugging Face folders (config.json, model.safetensors, tokenizer.json), which
 * llama.cpp cannot load: it reads GGUF only. The engine's HF path is checked
 * against llama.cpp on the GGUF that holds the same weights (our writer stores
 * the same values in both layouts, with llama q/k rows permuted and Gemma
 * norms folded the way llama.cpp's converter does). A half-precision folder
 * stores every tensor in F16/BF16, norms and biases included, where the GGUF
 * keeps those in F32; llama.cpp therefore gets an F32 GGUF whose values are
 * rounded exactly as the folder's are, so both sides compute in float32 on the
 * same weights and the float tolerance applies.
 */
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { Llama } from "node-llama-cpp";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, GgmlType } from "@infer/formats";
import { writeRandomGguf, writeRandomHf, type RandomHfSpec } from "../../src/testing/index.js";
import { floatArithmetic } from "./compare.js";
import { compareWithLlama, loadOurs, runEngine } from "./cross-check.js";
import { writeLlamaCppCopy } from "./gguf-copies.js";
import { closeLlama, openLlama } from "./llama-oracle.js";
import { ARCHITECTURES, RANDOM_RUN, withTempFolder } from "./random-models.js";

const llama = await openLlama();
after(closeLlama);

/** value -> its F16/BF16 rounding, as the safetensors writer stores it. */
const ROUND = {
  F16: (value: number) => f16ToF32(f32ToF16(value)),
  BF16: (value: number) => bf16ToF32(f32ToBf16(value)),
};

/**
 * The GGUF tensor's values rounded as the folder holds them. Gemma's GGUF norms
 * hold 1 + w where the folder holds w (rounded), so those round as w.
 */
function roundAsFolder(architecture: string, round: (value: number) => number) {
  return (name: string, values: Float32Array): Float32Array =>
    architecture === "gemma3" && name.endsWith("norm.weight") ? values.map((v) => round(v - 1) + 1) : values.map(round);
}

describe("Hugging Face folders vs llama.cpp on the same weights as GGUF", { skip: typeof llama === "string" ? llama : false }, () => {
  for (const architecture of ARCHITECTURES) {
    for (const dtype of ["F32", "F16", "BF16"] as const) {
      it(`${architecture} ${dtype} safetensors: logits and greedy decoding match llama.cpp on the GGUF`, async (t) => {
        const spec: RandomHfSpec = { architecture, seed: 7, dtype };
        await withTempFolder(async (dir) => {
          await writeRandomHf(join(dir, "hf"), spec);
          const model = await loadOurs(join(dir, "hf"), RANDOM_RUN.contextLength);
          const ours = await runEngine(model, RANDOM_RUN).finally(() => model.close());
          const gguf = join(dir, "model.gguf");
          await writeRandomGguf(gguf, { ...spec, type: GgmlType.F32 });
          const floats =
            dtype === "F32"
              ? gguf
              : await writeLlamaCppCopy(gguf, join(dir, "rounded.gguf"), { dequantize: true, mapValues: roundAsFolder(architecture, ROUND[dtype]) });
          await compareWithLlama(t, llama as Llama, floats, ours, {
            ...RANDOM_RUN,
            tolerance: floatArithmetic(architecture),
            label: `${architecture} ${dtype} safetensors`,
          });
        });
      });
    }
  }
});
