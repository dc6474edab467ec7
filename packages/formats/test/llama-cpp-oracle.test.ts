// llama.cpp (through node-llama-cpp, when installed) as the oracle for the
// writer and the codecs: a tiny llama whose token embedding is stored in each
// type must give exactly the logits of the same model with that embedding
// stored as F32 after our dequantizer. Equal logits mean llama.cpp loads our
// files and decodes our bytes exactly as dequantize() does.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CODEC_TYPES, GgmlType, GgufValueType, dequantize, quantize, typeName, writeGguf } from "../src/index.js";
import type { GgufTensorSpec, GgufValueInput } from "../src/index.js";

// The small part of node-llama-cpp's API used here (it is not a dependency of this package).
interface LlamaLike {
  loadModel(options: { modelPath: string }): Promise<LlamaModelLike>;
}
interface LlamaModelLike {
  createContext(options: { contextSize: number; threads: number }): Promise<LlamaContextLike>;
  dispose(): Promise<void>;
}
interface LlamaContextLike {
  getSequence(): {
    controlledEvaluate(input: (number | [number, { generateNext: { logits: true } }])[]): Promise<({ next?: { logits?: Map<number, number> } } | undefined)[]>;
  };
  dispose(): Promise<void>;
}

async function loadLlama(): Promise<LlamaLike | string> {
  const specifier = "node-llama-cpp"; // a variable, so TypeScript does not resolve the optional package
  try {
    const library = (await import(specifier)) as { getLlama(options: object): Promise<LlamaLike>; LlamaLogLevel: { error: unknown } };
    return await library.getLlama({
      gpu: false,
      build: "never",
      usePrebuiltBinaries: true,
      skipDownload: true,
      progressLogs: false,
      logLevel: library.LlamaLogLevel.error,
    });
  } catch (error) {
    return `node-llama-cpp with a prebuilt binary is not available (${(error as Error).message.split("\n")[0]})`;
  }
}

const llama = await loadLlama();
const DIM = 256; // a multiple of the K-quant block, so every type can store a row
const VOCAB = 512;

function randomMatrix(count: number, scale: number, seed: number): Float32Array {
  return Float32Array.from({ length: count }, () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed / 2 ** 32 - 0.5) * scale;
  });
}

/** A SentencePiece-style vocabulary llama.cpp accepts: specials, 256 byte tokens, filler pieces. */
function vocabulary(): Record<string, GgufValueInput> {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
  }
  while (tokens.length < VOCAB) {
    tokens.push(`▁w${tokens.length}`);
    types.push(1);
  }
  return {
    "tokenizer.ggml.model": "llama",
    "tokenizer.ggml.tokens": tokens,
    "tokenizer.ggml.scores": new Float32Array(VOCAB),
    "tokenizer.ggml.token_type": Int32Array.from(types),
    "tokenizer.ggml.bos_token_id": 1,
    "tokenizer.ggml.eos_token_id": 2,
    "tokenizer.ggml.unknown_token_id": 0,
  };
}

const METADATA: Record<string, GgufValueInput> = {
  "general.architecture": "llama",
  "llama.context_length": 128,
  "llama.embedding_length": DIM,
  "llama.block_count": 1,
  "llama.feed_forward_length": DIM,
  "llama.attention.head_count": 4,
  "llama.attention.head_count_kv": 4,
  "llama.rope.dimension_count": 64,
  "llama.attention.layer_norm_rms_epsilon": { type: GgufValueType.FLOAT32, value: 1e-5 },
  ...vocabulary(),
};

/** Every weight but the embedding, F32. Shapes in ggml order [row length, rows]. */
const OTHER_TENSORS: GgufTensorSpec[] = (() => {
  const ones = new Float32Array(DIM).fill(1);
  const square = (name: string, seed: number): GgufTensorSpec => ({ name, shape: [DIM, DIM], type: GgmlType.F32, data: randomMatrix(DIM * DIM, 0.1, seed) });
  return [
    { name: "output_norm.weight", shape: [DIM], type: GgmlType.F32, data: ones },
    { name: "output.weight", shape: [DIM, VOCAB], type: GgmlType.F32, data: randomMatrix(DIM * VOCAB, 0.2, 1) },
    { name: "blk.0.attn_norm.weight", shape: [DIM], type: GgmlType.F32, data: ones },
    square("blk.0.attn_q.weight", 2),
    square("blk.0.attn_k.weight", 3),
    square("blk.0.attn_v.weight", 4),
    square("blk.0.attn_output.weight", 5),
    { name: "blk.0.ffn_norm.weight", shape: [DIM], type: GgmlType.F32, data: ones },
    square("blk.0.ffn_gate.weight", 6),
    square("blk.0.ffn_down.weight", 7),
    square("blk.0.ffn_up.weight", 8),
  ];
})();

const EMBEDDING = randomMatrix(DIM * VOCAB, 2, 9); // [VOCAB rows of DIM]
/** Prompts that together use every token, so every embedding row reaches a logit. */
const PROMPTS = Array.from({ length: 9 }, (_, p) => [1, ...Array.from({ length: 60 }, (_, i) => (p * 60 + i) % VOCAB)]);

describe("llama.cpp reads what we write", { skip: typeof llama === "string" ? llama : false }, () => {
  let folder = "";
  before(async () => {
    folder = await mkdtemp(join(tmpdir(), "infer-llama-oracle-"));
  });
  after(async () => {
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  /** The last-position logits of each prompt for a model whose embedding is stored as given. */
  async function logits(name: string, type: GgmlType, data: Float32Array | Uint8Array, alignment?: number): Promise<Float32Array[]> {
    const path = join(folder, `${name}.gguf`);
    const embedding: GgufTensorSpec = { name: "token_embd.weight", shape: [DIM, VOCAB], type, data };
    await writeFile(path, writeGguf({ metadata: METADATA, tensors: [embedding, ...OTHER_TENSORS], alignment }));
    const model = await (llama as LlamaLike).loadModel({ modelPath: path });
    try {
      const results: Float32Array[] = [];
      for (const prompt of PROMPTS) {
        // A fresh context per prompt: nothing carries over between prompts.
        const context = await model.createContext({ contextSize: 64, threads: 1 });
        try {
          const last: [number, { generateNext: { logits: true } }] = [prompt.at(-1)!, { generateNext: { logits: true } }];
          const output = await context.getSequence().controlledEvaluate([...prompt.slice(0, -1), last]);
          const sparse = output[prompt.length - 1]?.next?.logits;
          assert.equal(sparse?.size, VOCAB);
          const dense = new Float32Array(VOCAB);
          for (const [id, value] of sparse!) dense[id] = value;
          results.push(dense);
        } finally {
          await context.dispose();
        }
      }
      return results;
    } finally {
      await model.dispose();
    }
  }

  function maxDifference(a: Float32Array[], b: Float32Array[]): number {
    let max = 0;
    a.forEach((row, p) => row.forEach((value, i) => (max = Math.max(max, Math.abs(value - b[p]![i]!)))));
    return max;
  }

  for (const type of CODEC_TYPES) {
    it(`${typeName(type)}: llama.cpp decodes our bytes exactly as dequantize() does`, async () => {
      const bytes = quantize(type, EMBEDDING);
      const stored = await logits(`stored-${typeName(type)}`, type, bytes);
      const decoded = await logits(`decoded-${typeName(type)}`, GgmlType.F32, dequantize(type, bytes, EMBEDDING.length));
      assert.equal(maxDifference(stored, decoded), 0);
    });
  }

  it("a non-default alignment (general.alignment = 64) loads and computes the same", async () => {
    const aligned = await logits("aligned-64", GgmlType.F32, EMBEDDING, 64);
    const plain = await logits("aligned-32", GgmlType.F32, EMBEDDING);
    assert.equal(maxDifference(aligned, plain), 0);
  });

  it("the comparison is sensitive: the unquantized embedding gives other logits than Q4_0", async () => {
    const exact = await logits("exact", GgmlType.F32, EMBEDDING);
    const q4 = await logits("q4", GgmlType.Q4_0, quantize(GgmlType.Q4_0, EMBEDDING));
    assert.ok(maxDifference(exact, q4) > 1e-3);
  });
});
