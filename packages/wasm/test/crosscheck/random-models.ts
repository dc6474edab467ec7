/**
 * The random-model cross-check shared by the test files of this folder: write
 * a model with our GGUF writer, run it through the engine as users get it and
 * compare with llama.cpp on the file as stored; for encoded matrices, also run
 * it on the reference kernels (float arithmetic on the dequantized weights) and
 * compare with llama.cpp on a copy dequantized to F32: the same weights in
 * float arithmetic on both sides, a much tighter match.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import type { Llama } from "node-llama-cpp";
import { GgmlType, typeName } from "@infer/formats";
import { referenceKernels, type Kernels } from "../../src/index.js";
import { writeRandomGguf, type RandomGgufSpec } from "../../src/testing/index.js";
import { floatArithmetic, toleranceFor } from "./compare.js";
import { compareWithLlama, loadOurs, runEngine, type RunOptions } from "./cross-check.js";
import { writeLlamaCppCopy } from "./gguf-copies.js";

/** Byte-level prompts of 20+ tokens: past Gemma 3's test window of 8, so sliding layers mask. */
export const RANDOM_RUN: RunOptions = {
  prompts: ["Hello there, the answer is in the", "an ancient tower of stones; 42 owls!"],
  greedySteps: 32,
  contextLength: 128,
};

export const ARCHITECTURES = ["llama", "qwen2", "qwen3", "gemma3", "phi3"] as const;

export async function withTempFolder<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "infer-crosscheck-"));
  try {
    return await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function caseLabel(spec: RandomGgufSpec): string {
  const rope = spec.llama3RopeScaling ? ", Llama 3.1 RoPE" : spec.longRope ? `, LongRoPE from ${spec.longRope.originalContextLength}` : "";
  return `${spec.architecture} ${typeName(spec.type ?? GgmlType.F32)}${rope}`;
}

export async function crossCheckRandomModel(t: TestContext, llama: Llama, spec: RandomGgufSpec, run = RANDOM_RUN): Promise<void> {
  const type = spec.type ?? GgmlType.F32;
  const label = caseLabel(spec);
  await withTempFolder(async (dir) => {
    const path = join(dir, "model.gguf");
    await writeRandomGguf(path, spec);
    const engine = async (kernels?: Kernels) => {
      const model = await loadOurs(path, run.contextLength, kernels);
      return runEngine(model, run).finally(() => model.close());
    };
    const ours = await engine();
    const loaded = await compareWithLlama(t, llama, path, ours, { ...run, tolerance: toleranceFor(type, spec.architecture), label });
    if (!loaded || type === GgmlType.F32) return;
    const dequantized = await writeLlamaCppCopy(path, join(dir, "dequantized.gguf"), { dequantize: true });
    await compareWithLlama(t, llama, dequantized, await engine(referenceKernels), {
      ...run,
      tolerance: floatArithmetic(spec.architecture),
      label: `${label}, reference kernels vs llama.cpp on its dequantized F32 copy`,
    });
  });
}
