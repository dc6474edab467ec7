/**
 * Random small models of every architecture: GGUF and Hugging Face layouts of
 * the same weights give the same logits, both equal a plain float64 forward
 * pass, quantized and half-precision files load and stay close, and batching
 * (prefill, decode, several sequences) never changes a sequence's logits.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgmlType, type GgufTensorSpec } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import type { Transformer } from "../../src/engine/transformer.js";
import { loadTransformer } from "../../src/load/load.js";
import { writeRandomGguf, writeRandomHf, type RandomArchitecture, type RandomModelSpec } from "../../src/testing/index.js";
import { naiveLogits } from "./naive-forward.js";
import { argmax, maxRelativeError } from "./helpers.js";

const ARCHITECTURES: RandomArchitecture[] = ["llama", "qwen2", "qwen3", "gemma3", "phi3"];
/** 14 tokens: longer than Gemma's test window of 8, so sliding layers mask something. */
const PROMPT = [5, 77, 261, 32, 104, 101, 108, 108, 111, 258, 44, 200, 3, 99];

function prefill(transformer: Transformer, tokens: number[], cacheLength = 32): Float32Array {
  const n = tokens.length;
  return transformer.forward(
    {
      tokens: Int32Array.from(tokens),
      positions: Int32Array.from(tokens, (_, i) => i),
      seqIds: new Int32Array(n),
      logitRows: Int32Array.from(tokens, (_, i) => i),
    },
    transformer.createCache(1, cacheLength),
  );
}

async function withFolder<T>(run: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "infer-random-"));
  try {
    return await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

for (const architecture of ARCHITECTURES) {
  test(`${architecture}: GGUF and HF layouts of the same random weights give the float64 reference's logits`, async () => {
    await withFolder(async (dir) => {
      const spec: RandomModelSpec = {
        architecture,
        seed: 11,
        // Exercise Llama 3.1 RoPE scaling on both paths: HF rope_scaling and GGUF rope_freqs.weight.
        ...(architecture === "llama"
          ? { llama3RopeScaling: { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 16 } }
          : {}),
      };
      const dims = await writeRandomGguf(join(dir, "model.gguf"), spec);
      await writeRandomHf(join(dir, "hf"), spec);
      const gguf = await loadTransformer(join(dir, "model.gguf"));
      const hf = await loadTransformer(join(dir, "hf"));
      assert.equal(gguf.transformer.config.architecture, architecture);
      assert.equal(hf.transformer.config.architecture, architecture);
      assert.equal(gguf.transformer.parameterCount, hf.transformer.parameterCount);
      assert.deepEqual(gguf.transformer.config.layerWindows, hf.transformer.config.layerWindows);
      if (architecture === "gemma3") assert.deepEqual(hf.transformer.config.layerWindows, [8, 8, 8, 8, 8, 0]);

      const expected = naiveLogits(dims, PROMPT).flatMap((row) => Array.from(row));
      const fromGguf = prefill(gguf.transformer, PROMPT);
      const fromHf = prefill(hf.transformer, PROMPT);
      assert.ok(maxRelativeError(fromGguf, expected) < 1e-5, `GGUF vs float64: ${maxRelativeError(fromGguf, expected)}`);
      assert.ok(maxRelativeError(fromHf, expected) < 1e-5, `HF vs float64: ${maxRelativeError(fromHf, expected)}`);
    });
  });
}

test("quantized GGUF (Q8_0, Q4_K) and half-precision HF (F16, BF16) files load, report their encoding, and stay close to F32", async () => {
  await withFolder(async (dir) => {
    // K-quants need rows of 256: a wider model.
    const spec: RandomModelSpec = { architecture: "llama", seed: 5, hiddenSize: 256, numHeads: 4, ffnSize: 256 };
    await writeRandomGguf(join(dir, "f32.gguf"), spec);
    const reference = prefill((await loadTransformer(join(dir, "f32.gguf"))).transformer, PROMPT);
    // One matmul over uniform random weights loses ~0.4% (Q8_0) and ~6% (Q4_K) in relative RMS;
    // two layers plus embedding and output compound that.
    const cases = [
      { file: "q8.gguf", type: GgmlType.Q8_0, bits: 8, group: 32, tolerance: 0.05 },
      { file: "q4k.gguf", type: GgmlType.Q4_K, bits: 4, group: 256, tolerance: 0.5 },
    ];
    for (const { file, type, bits, group, tolerance } of cases) {
      await writeRandomGguf(join(dir, file), { ...spec, type });
      const loaded = await loadTransformer(join(dir, file));
      assert.equal(loaded.quantBits, bits, file);
      assert.equal(loaded.quantGroup, group, file);
      assert.ok(loaded.transformer.weightBytes < loaded.transformer.parameterCount * 1.1, `${file} keeps quantized bytes`);
      const logits = prefill(loaded.transformer, PROMPT);
      assert.ok(maxRelativeError(logits, reference) < tolerance, `${file}: ${maxRelativeError(logits, reference)}`);
    }
    for (const [dtype, tolerance] of [
      ["F16", 0.01],
      ["BF16", 0.05],
    ] as const) {
      await writeRandomHf(join(dir, dtype), { ...spec, dtype });
      const loaded = await loadTransformer(join(dir, dtype));
      assert.equal(loaded.quantBits, 16);
      assert.equal(loaded.quantGroup, 0);
      const logits = prefill(loaded.transformer, PROMPT);
      assert.ok(maxRelativeError(logits, reference) < tolerance, `${dtype}: ${maxRelativeError(logits, reference)}`);
    }
  });
});

test("prefill in one batch, token-by-token decode, and two interleaved sequences give the same logits", async () => {
  await withFolder(async (dir) => {
    for (const architecture of ["llama", "gemma3"] as const) {
      const path = join(dir, `${architecture}.gguf`);
      await writeRandomGguf(path, { architecture, seed: 3 });
      const { transformer } = await loadTransformer(path);
      const vocab = transformer.config.vocabSize;
      const all = prefill(transformer, PROMPT);

      // One token per call.
      const cache = transformer.createCache(1, 32);
      PROMPT.forEach((token, position) => {
        const logits = transformer.forward(
          { tokens: Int32Array.of(token), positions: Int32Array.of(position), seqIds: Int32Array.of(0), logitRows: Int32Array.of(0) },
          cache,
        );
        assert.ok(maxRelativeError(logits, all.subarray(position * vocab, (position + 1) * vocab)) < 1e-5, `${architecture} @${position}`);
      });
      assert.equal(cache.length(0), PROMPT.length);

      // Two sequences: the prompt's first 9 tokens in slot 1 (prefilled earlier), then both
      // sequences advance in one interleaved batch; slot 0 prefills another prompt meanwhile.
      const other = [9, 8, 7, 6, 5];
      const otherAlone = prefill(transformer, other);
      const shared = transformer.createCache(2, 32);
      transformer.forward(
        {
          tokens: Int32Array.from(PROMPT.slice(0, 9)),
          positions: Int32Array.from({ length: 9 }, (_, i) => i),
          seqIds: new Int32Array(9).fill(1),
          logitRows: new Int32Array(0),
        },
        shared,
      );
      const mixed = transformer.forward(
        {
          tokens: Int32Array.of(other[0]!, PROMPT[9]!, other[1]!, other[2]!, PROMPT[10]!, other[3]!, other[4]!),
          positions: Int32Array.of(0, 9, 1, 2, 10, 3, 4),
          seqIds: Int32Array.of(0, 1, 0, 0, 1, 0, 0),
          logitRows: Int32Array.of(4, 6),
        },
        shared,
      );
      assert.ok(maxRelativeError(mixed.subarray(0, vocab), all.subarray(10 * vocab, 11 * vocab)) < 1e-5, `${architecture} slot 1`);
      assert.ok(maxRelativeError(mixed.subarray(vocab), otherAlone.subarray(4 * vocab, 5 * vocab)) < 1e-5, `${architecture} slot 0`);
      assert.equal(shared.length(0), 5);
      assert.equal(shared.length(1), 11);

      // Truncating slot 1 and running a different continuation matches a fresh prefill of it.
      shared.truncate(1, 6);
      const branched = transformer.forward(
        { tokens: Int32Array.of(42), positions: Int32Array.of(6), seqIds: Int32Array.of(1), logitRows: Int32Array.of(0) },
        shared,
      );
      const fresh = prefill(transformer, [...PROMPT.slice(0, 6), 42]);
      assert.ok(maxRelativeError(branched, fresh.subarray(6 * vocab)) < 1e-5, `${architecture} truncate`);
      assert.equal(argmax(branched), argmax(fresh, 6 * vocab, vocab));
    }
  });
});

test("phi3 LongRoPE (HF rope_scaling and GGUF rope_factors tensors) picks short or long factors by the cache's context", async () => {
  await withFolder(async (dir) => {
    const spec: RandomModelSpec = { architecture: "phi3", seed: 21, contextLength: 128, longRope: { originalContextLength: 32 } };
    const dims = await writeRandomGguf(join(dir, "phi3.gguf"), spec);
    await writeRandomHf(join(dir, "hf"), spec);
    const gguf = (await loadTransformer(join(dir, "phi3.gguf"))).transformer;
    const hf = (await loadTransformer(join(dir, "hf"))).transformer;
    for (const cacheLength of [32, 64]) {
      const expected = naiveLogits(dims, PROMPT, cacheLength).flatMap((row) => Array.from(row));
      for (const [name, transformer] of [
        ["GGUF", gguf],
        ["HF", hf],
      ] as const) {
        const logits = prefill(transformer, PROMPT, cacheLength);
        assert.ok(maxRelativeError(logits, expected) < 1e-5, `${name}, cache ${cacheLength}: ${maxRelativeError(logits, expected)}`);
      }
    }
    // Short and long factors differ enough to change the logits.
    assert.ok(maxRelativeError(prefill(hf, PROMPT, 32), prefill(hf, PROMPT, 64)) > 1e-3);
  });
});

test("phi3 GGUF with q, k and v stored apart equals the fused attn_qkv file", async () => {
  await withFolder(async (dir) => {
    const spec: RandomModelSpec = { architecture: "phi3", seed: 22 };
    const dims = await writeRandomGguf(join(dir, "fused.gguf"), spec);
    const gguf = await readGguf(join(dir, "fused.gguf"));
    const qDim = dims.numHeads * dims.headDim;
    const kvDim = dims.numKVHeads * dims.headDim;
    const tensors = gguf.tensors.flatMap((info): GgufTensorSpec[] => {
      const data = gguf.tensorData(info);
      if (!info.name.endsWith("attn_qkv.weight")) return [{ name: info.name, shape: info.shape, type: info.type, data }];
      const rowBytes = dims.hiddenSize * 4; // F32 rows
      const part = (suffix: string, fromRow: number, rows: number): GgufTensorSpec => ({
        name: info.name.replace("attn_qkv", suffix),
        shape: [dims.hiddenSize, rows],
        type: info.type,
        data: data.slice(fromRow * rowBytes, (fromRow + rows) * rowBytes),
      });
      return [part("attn_q", 0, qDim), part("attn_k", qDim, kvDim), part("attn_v", qDim + kvDim, kvDim)];
    });
    await writeGgufFile(join(dir, "split.gguf"), { metadata: gguf.metadata, tensors });
    const fused = prefill((await loadTransformer(join(dir, "fused.gguf"))).transformer, PROMPT);
    const split = prefill((await loadTransformer(join(dir, "split.gguf"))).transformer, PROMPT);
    assert.ok(maxRelativeError(split, fused) < 1e-6);
  });
});
