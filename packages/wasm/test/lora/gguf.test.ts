/**
 * GGUF LoRA files as llama.cpp writes them (F16 tensors, alpha absent = scale
 * 1) on a GGUF llama base, against the base with B A merged into its file;
 * our writer's files read back; q/k row orders against the random models'
 * own permutation.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { cosineSimilarity, maxAbsDifference } from "@infer/core/testing";
import { dequantize, GgmlType, parseGguf, writeGguf } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import type { Transformer } from "../../src/engine/transformer.js";
import { loadTransformer } from "../../src/load/load.js";
import {
  adapterFromGguf,
  ggufLoraSpec,
  ggufLoraTensorName,
  inLayout,
  loraDeltas,
  permuteRotaryRows,
  readLoraAdapter,
  unpermuteRotaryRows,
} from "../../src/lora/index.js";
import { permuteForNormalRope, writeRandomGguf } from "../../src/testing/index.js";
import { randomArray } from "../engine/helpers.js";

const PROMPT = [1, 70, 33, 120, 8, 91, 200, 17];

function logitsOf(transformer: Transformer): Float32Array {
  const n = PROMPT.length;
  return transformer.forward(
    { tokens: Int32Array.from(PROMPT), positions: Int32Array.from(PROMPT, (_, i) => i), seqIds: new Int32Array(n), logitRows: Int32Array.from(PROMPT, (_, i) => i) },
    transformer.createCache(1, n),
  );
}

describe("GGUF LoRA files", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-lora-gguf-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("llama.cpp's layout: F16 pairs without alpha add B A unscaled, as merging it into the file does", async () => {
    const base = join(dir, "base.gguf");
    await writeRandomGguf(base, { architecture: "llama", seed: 21 });
    const model = await readGguf(base);
    const rank = 2;
    const adapterTensors = [];
    const merged = [];
    for (const info of model.tensors) {
      const values = dequantize(info.type, model.tensorData(info), info.shape.reduce((a, b) => a * b, 1));
      const match = /^blk\.(\d+)\.(attn_q|attn_k|ffn_down)\.weight$/.exec(info.name);
      if (match) {
        const [inDim, outDim] = info.shape as [number, number];
        const seed = 10 * Number(match[1]) + match[2]!.length;
        // F16 values exactly, so the merged file and the adapter hold the same numbers.
        const a = Float32Array.from(randomArray(seed, rank * inDim, 0.4), (v) => Math.round(v * 256) / 256);
        const b = Float32Array.from(randomArray(seed + 1, outDim * rank, 0.4), (v) => Math.round(v * 256) / 256);
        adapterTensors.push(
          { name: `${info.name}.lora_a`, shape: [inDim, rank], type: GgmlType.F16, data: a },
          { name: `${info.name}.lora_b`, shape: [rank, outDim], type: GgmlType.F16, data: b },
        );
        for (let o = 0; o < outDim; o++) {
          for (let i = 0; i < inDim; i++) {
            let delta = 0;
            for (let j = 0; j < rank; j++) delta += b[o * rank + j]! * a[j * inDim + i]!;
            values[o * inDim + i]! += delta;
          }
        }
      }
      merged.push({ name: info.name, shape: info.shape, type: GgmlType.F32, data: values });
    }
    const adapterPath = join(dir, "adapter.gguf");
    await writeGgufFile(adapterPath, {
      metadata: { "general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora" },
      tensors: adapterTensors,
    });
    await writeGgufFile(join(dir, "merged.gguf"), { metadata: model.metadata, tensors: merged });

    const adapter = await readLoraAdapter(adapterPath);
    assert.equal(adapter.layout, "gguf");
    assert.equal(adapter.alpha, adapter.rank, "no alpha: scale 1");
    assert.deepEqual(adapter.targetModules, ["q_proj", "k_proj", "down_proj"]);
    const loaded = await loadTransformer(base);
    loaded.transformer.lora = loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
    const expected = logitsOf((await loadTransformer(join(dir, "merged.gguf"))).transformer);
    const logits = logitsOf(loaded.transformer);
    assert.ok(cosineSimilarity(logits, expected) >= 0.99999, `cosine ${cosineSimilarity(logits, expected)}`);
    assert.ok(maxAbsDifference(logits, expected) < 1e-3, `max difference ${maxAbsDifference(logits, expected)}`);
  });

  test("our GGUF LoRA writer's file reads back as the same adapter", async () => {
    const pairs = [0, 1].map((layer) => ({
      layer,
      module: "v_proj" as const,
      rank: 2,
      inFeatures: 8,
      outFeatures: 4,
      a: randomArray(layer, 16),
      b: randomArray(layer + 9, 8),
    }));
    const adapter = { rank: 2, alpha: 4, dropout: 0, targetModules: ["v_proj" as const], useRslora: false, layout: "gguf" as const, pairs, source: "test" };
    const bytes = writeGguf(ggufLoraSpec(adapter, "qwen2"));
    const back = adapterFromGguf(parseGguf(bytes, "x.gguf"), "x.gguf");
    assert.equal(back.architecture, "qwen2");
    assert.equal(back.alpha, 4);
    assert.deepEqual(back.pairs, pairs);
    assert.ok(parseGguf(bytes).tensors.some((t) => t.name === ggufLoraTensorName(1, "v_proj", "B") && t.name === "blk.1.attn_v.weight.lora_b"));
    // rsLoRA's scale alpha / sqrt(r) survives as llama.cpp's alpha / r.
    const rs = adapterFromGguf(parseGguf(writeGguf(ggufLoraSpec({ ...adapter, useRslora: true }, "qwen2"))), "rs.gguf");
    assert.ok(Math.abs(rs.alpha / rs.rank - 4 / Math.sqrt(2)) < 1e-6);
  });

  test("q/k B rows move as the GGUF converter moves q/k weight rows, and back", () => {
    const heads = 2;
    const headDim = 8;
    const rank = 3;
    const b = randomArray(5, heads * headDim * rank);
    assert.deepEqual(permuteRotaryRows(b, heads, rank), permuteForNormalRope(b, heads, headDim));
    assert.deepEqual(unpermuteRotaryRows(permuteRotaryRows(b, heads, rank), heads, rank), b);
    const pair = { layer: 0, module: "q_proj" as const, rank, inFeatures: 4, outFeatures: heads * headDim, a: randomArray(6, rank * 4), b };
    const hf = { rank, alpha: 1, dropout: 0, targetModules: ["q_proj" as const], useRslora: false, layout: "hf" as const, pairs: [pair], source: "t" };
    const gguf = inLayout(hf, "gguf", "llama", { numHeads: heads, numKVHeads: 1 });
    assert.deepEqual(gguf.pairs[0]!.b, permuteForNormalRope(b, heads, headDim));
    assert.equal(gguf.pairs[0]!.a, pair.a, "A (the input side) does not move");
    assert.equal(inLayout(hf, "gguf", "qwen2", { numHeads: heads, numKVHeads: 1 }).pairs[0]!.b, b, "qwen2 stores the same rows in both");
  });
});
