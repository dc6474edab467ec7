/**
 * LoRA in the forward, on random models of each architecture: an adapter on
 * all seven projections, applied at inference (reference and WebAssembly
 * kernels; Hugging Face and GGUF bases, whose llama q/k rows differ), gives
 * the logits of the same model with the adapter merged into its weights.
 */
import assert from "node:assert/strict";
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { cosineSimilarity, maxAbsDifference } from "@infer/core/testing";
import { toFloat32, writeSafetensors } from "@infer/formats";
import { readSafetensors } from "@infer/formats/node";
import { createWasmKernels, referenceKernels, type Kernels } from "../../src/index.js";
import type { Transformer } from "../../src/engine/transformer.js";
import { loadTransformer } from "../../src/load/load.js";
import { hfModulePath, LORA_MODULES, loraDeltas, mergePairInto, type LoraAdapter, type LoraModule, type LoraPair } from "../../src/lora/index.js";
import { writeRandomGguf, writeRandomHf, type RandomArchitecture, type RandomModelDims } from "../../src/testing/index.js";
import { randomArray } from "../engine/helpers.js";

const PROMPT = [1, 40, 77, 3, 120, 64, 9, 200, 31, 5, 99, 150];

/** Every position's logits of PROMPT, one batch. */
function logitsOf(transformer: Transformer): Float32Array {
  const n = PROMPT.length;
  return transformer.forward(
    { tokens: Int32Array.from(PROMPT), positions: Int32Array.from(PROMPT, (_, i) => i), seqIds: new Int32Array(n), logitRows: Int32Array.from(PROMPT, (_, i) => i) },
    transformer.createCache(1, n),
  );
}

/** [out, in] of each projection in a model of these dimensions. */
function projectionShape(dims: RandomModelDims, module: LoraModule): [number, number] {
  const q = dims.numHeads * dims.headDim;
  const kv = dims.numKVHeads * dims.headDim;
  const shapes: Record<LoraModule, [number, number]> = {
    q_proj: [q, dims.hiddenSize],
    k_proj: [kv, dims.hiddenSize],
    v_proj: [kv, dims.hiddenSize],
    o_proj: [dims.hiddenSize, q],
    gate_proj: [dims.ffnSize, dims.hiddenSize],
    up_proj: [dims.ffnSize, dims.hiddenSize],
    down_proj: [dims.hiddenSize, dims.ffnSize],
  };
  return shapes[module];
}

function randomAdapter(dims: RandomModelDims, modules: readonly LoraModule[], seed: number): LoraAdapter {
  const rank = 3;
  const pairs: LoraPair[] = [];
  for (let layer = 0; layer < dims.numLayers; layer++) {
    for (const module of modules) {
      const [outFeatures, inFeatures] = projectionShape(dims, module);
      const s = seed + 100 * layer + LORA_MODULES.indexOf(module);
      pairs.push({ layer, module, rank, inFeatures, outFeatures, a: randomArray(s, rank * inFeatures, 0.3), b: randomArray(s + 50, outFeatures * rank, 0.3) });
    }
  }
  return { rank, alpha: 6, dropout: 0, targetModules: [...modules], useRslora: false, layout: "hf", pairs, source: "random adapter" };
}

/** A copy of the HF folder with the adapter merged into its F32 weights (an independent path: no deltas at run time). */
async function mergedCopy(folder: string, out: string, adapter: LoraAdapter): Promise<void> {
  await cp(folder, out, { recursive: true });
  const file = await readSafetensors(join(folder, "model.safetensors"));
  const pairs = new Map(adapter.pairs.map((p) => [`model.layers.${p.layer}.${hfModulePath(p.module)}.weight`, p]));
  const tensors = [...file.tensors.values()].map((t) => {
    const values = toFloat32(t);
    const pair = pairs.get(t.name);
    if (pair) mergePairInto(values, adapter, pair);
    return { name: t.name, dtype: "F32" as const, shape: t.shape, data: values };
  });
  assert.equal([...pairs.keys()].filter((name) => !file.tensors.has(name)).length, 0, "every adapted weight is in the file");
  await writeFile(join(out, "model.safetensors"), writeSafetensors(tensors, file.metadata));
}

describe("LoRA on every projection of random models", () => {
  let dir: string;
  let wasm: Kernels;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-lora-arch-"));
    wasm = await createWasmKernels({ threads: 2 });
  });
  after(async () => {
    await wasm.dispose?.();
    await rm(dir, { recursive: true, force: true });
  });

  for (const architecture of ["llama", "qwen2", "qwen3", "gemma3"] as RandomArchitecture[]) {
    test(`${architecture}: adapter at inference = adapter merged, HF and GGUF bases, reference and wasm kernels`, async () => {
      const hf = join(dir, `${architecture}-hf`);
      const gguf = join(dir, `${architecture}.gguf`);
      const dims = await writeRandomHf(hf, { architecture, seed: 11 });
      await writeRandomGguf(gguf, { architecture, seed: 11 });
      const adapter = randomAdapter(dims, LORA_MODULES, 7);
      const merged = join(dir, `${architecture}-merged`);
      await mergedCopy(hf, merged, adapter);
      const expected = logitsOf((await loadTransformer(merged)).transformer);
      const base = logitsOf((await loadTransformer(hf)).transformer);
      assert.ok(cosineSimilarity(base, expected) < 0.999, "the adapter changes the logits");

      for (const [label, path] of [["HF", hf], ["GGUF", gguf]] as const) {
        for (const kernels of [referenceKernels, wasm]) {
          const loaded = await loadTransformer(path, { kernels });
          try {
            loaded.transformer.lora = loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
            const logits = logitsOf(loaded.transformer);
            const what = `${architecture} ${label} on ${kernels.name}`;
            assert.ok(cosineSimilarity(logits, expected) >= 0.99999, `${what}: cosine ${cosineSimilarity(logits, expected)}`);
            assert.ok(maxAbsDifference(logits, expected) < 2e-3, `${what}: max difference ${maxAbsDifference(logits, expected)}`);
          } finally {
            loaded.transformer.releaseMemory();
          }
        }
      }
    });
  }

  test("phi3 fuses q/k/v and gate/up: o_proj and down_proj adapt, q_proj is UNSUPPORTED naming the module", async () => {
    const hf = join(dir, "phi3-hf");
    const dims = await writeRandomHf(hf, { architecture: "phi3", seed: 5 });
    const loaded = await loadTransformer(hf);
    const base = { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices };
    assert.throws(
      () => loraDeltas(randomAdapter(dims, ["q_proj"], 3), base),
      (error: unknown) => isInferenceError(error, "UNSUPPORTED") && /q_proj/.test((error as Error).message),
    );
    const adapter = randomAdapter(dims, ["o_proj", "down_proj"], 3);
    const merged = join(dir, "phi3-merged");
    await mergedCopy(hf, merged, adapter);
    loaded.transformer.lora = loraDeltas(adapter, base);
    const logits = logitsOf(loaded.transformer);
    const expected = logitsOf((await loadTransformer(merged)).transformer);
    assert.ok(cosineSimilarity(logits, expected) >= 0.99999, `cosine ${cosineSimilarity(logits, expected)}`);
  });
});
