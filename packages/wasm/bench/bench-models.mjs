// Bench models: random weights in the exact shapes of real small models, written
// as GGUF files that both our engine and llama.cpp load. Speed depends on shapes
// and encodings, not on what the weights say, so random bytes measure the same
// work as the real checkpoints (which cannot be downloaded here).
//
// Files are streamed tensor by tensor (a 1B-parameter F16 model never sits in
// memory whole): the metadata header comes from our GGUF writer, the tensor
// table and the data are appended here in the same layout.
import { mkdir, open, rename, stat } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { TextEncoder } from "node:util";
import { GgmlType, f32ToF16, rowBytes, typeInfo, typeName, writeGguf } from "@infer/formats";
import { syntheticVocab } from "../dist/src/testing/byte-vocab.js";

/** The shapes benchmarked (from each model's config.json). */
export const BENCH_SHAPES = {
  smollm2: {
    title: "SmolLM2-135M",
    architecture: "llama",
    hidden: 576,
    layers: 30,
    heads: 9,
    kvHeads: 3,
    ffn: 1536,
    vocab: 49152,
    tied: true,
    ropeTheta: 100000,
    biases: false,
  },
  qwen25: {
    title: "Qwen2.5-0.5B",
    architecture: "qwen2",
    hidden: 896,
    layers: 24,
    heads: 14,
    kvHeads: 2,
    ffn: 4864,
    vocab: 151936,
    tied: true,
    ropeTheta: 1000000,
    biases: true,
  },
  llama32: {
    title: "Llama-3.2-1B",
    architecture: "llama",
    hidden: 2048,
    layers: 16,
    heads: 32,
    kvHeads: 8,
    ffn: 8192,
    vocab: 128256,
    tied: true,
    ropeTheta: 500000,
    biases: false,
  },
};

export const BENCH_TYPES = { q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0, f16: GgmlType.F16, q5_0: GgmlType.Q5_0, q5_1: GgmlType.Q5_1 };
/** The types a bench without --types runs (the three; Q5_0 and Q5_1, the types Q4_K_M and Q5_K_M files fall back to for rows not a multiple of 256, on request). */
export const DEFAULT_BENCH_TYPES = ["q8_0", "q4_0", "f16"];

const ALIGNMENT = 32;
/**
 * In each file's name: bumped whenever the files' contents change (2: synthetic
 * words that re-encode to the ids generated), so older cached files are rewritten.
 */
const BENCH_MODEL_VERSION = 2;
const CONTEXT_LENGTH = 8192;

/** The path of a bench model, written first when missing. */
export async function benchModel(folder, shapeName, typeName_) {
  const shape = BENCH_SHAPES[shapeName];
  const type = BENCH_TYPES[typeName_];
  if (!shape) throw new Error(`unknown bench model "${shapeName}" (known: ${Object.keys(BENCH_SHAPES).join(", ")})`);
  if (type === undefined) throw new Error(`unknown bench type "${typeName_}" (known: ${Object.keys(BENCH_TYPES).join(", ")})`);
  const path = join(folder, `${shapeName}-${typeName_}-v${BENCH_MODEL_VERSION}.gguf`);
  if (await exists(path)) return path;
  await mkdir(folder, { recursive: true });
  const started = performance.now();
  await writeBenchGguf(`${path}.partial`, shape, type);
  await rename(`${path}.partial`, path);
  const { size } = await stat(path);
  console.error(`wrote ${path} (${(size / 2 ** 20).toFixed(0)} MiB, ${((performance.now() - started) / 1000).toFixed(1)} s)`);
  return path;
}

async function exists(path) {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Tensor table in GGUF order: [name, ggml shape (row length first), type]. */
function tensorList(shape, type) {
  const { hidden, heads, kvHeads, ffn, vocab } = shape;
  const headDim = hidden / heads;
  const qDim = heads * headDim;
  const kvDim = kvHeads * headDim;
  const list = [["token_embd.weight", [hidden, vocab], type]];
  for (let i = 0; i < shape.layers; i++) {
    const name = (part, kind = "weight") => `blk.${i}.${part}.${kind}`;
    list.push([name("attn_norm"), [hidden], GgmlType.F32]);
    list.push([name("attn_q"), [hidden, qDim], type], [name("attn_k"), [hidden, kvDim], type], [name("attn_v"), [hidden, kvDim], type]);
    if (shape.biases) {
      list.push([name("attn_q", "bias"), [qDim], GgmlType.F32], [name("attn_k", "bias"), [kvDim], GgmlType.F32]);
      list.push([name("attn_v", "bias"), [kvDim], GgmlType.F32]);
    }
    list.push([name("attn_output"), [qDim, hidden], type], [name("ffn_norm"), [hidden], GgmlType.F32]);
    list.push([name("ffn_gate"), [hidden, ffn], type], [name("ffn_up"), [hidden, ffn], type], [name("ffn_down"), [ffn, hidden], type]);
  }
  list.push(["output_norm.weight", [hidden], GgmlType.F32]);
  if (!shape.tied) list.push(["output.weight", [hidden, vocab], type]);
  return list;
}

async function writeBenchGguf(path, shape, type) {
  const arch = shape.architecture;
  const vocab = syntheticVocab(shape.vocab);
  const u32 = (value) => ({ type: 4, value }); // GgufValueType.UINT32
  const f32 = (value) => ({ type: 6, value }); // GgufValueType.FLOAT32
  const metadata = {
    "general.architecture": arch,
    [`${arch}.context_length`]: u32(CONTEXT_LENGTH),
    [`${arch}.embedding_length`]: u32(shape.hidden),
    [`${arch}.block_count`]: u32(shape.layers),
    [`${arch}.feed_forward_length`]: u32(shape.ffn),
    [`${arch}.attention.head_count`]: u32(shape.heads),
    [`${arch}.attention.head_count_kv`]: u32(shape.kvHeads),
    [`${arch}.attention.layer_norm_rms_epsilon`]: f32(1e-5),
    [`${arch}.rope.freq_base`]: f32(shape.ropeTheta),
    [`${arch}.rope.dimension_count`]: u32(shape.hidden / shape.heads),
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.pre": "gpt-2",
    "tokenizer.ggml.tokens": vocab.tokens,
    "tokenizer.ggml.token_type": Int32Array.from(vocab.tokenTypes),
    "tokenizer.ggml.merges": vocab.merges,
    "tokenizer.ggml.bos_token_id": u32(vocab.bosId),
    "tokenizer.ggml.eos_token_id": u32(vocab.eosId),
    "tokenizer.ggml.add_bos_token": false,
    // Last, so the header ends in a non-zero byte (see below).
    "general.name": `infer bench model, ${shape.title} shape, ${typeName(type)}`,
  };
  // The writer's header with no tensors: magic, version, tensor count (u64 at byte 8), metadata,
  // then zero padding to the alignment, cut off here (the name's last character is not zero).
  const padded_ = writeGguf({ metadata, tensors: [] });
  let end = padded_.length;
  while (padded_[end - 1] === 0) end--;
  const head = padded_.slice(0, end);
  const tensors = tensorList(shape, type);
  new DataView(head.buffer, head.byteOffset).setBigUint64(8, BigInt(tensors.length), true);

  const table = [];
  let offset = 0;
  const encoder = new TextEncoder();
  for (const [name, dims, tensorType] of tensors) {
    const nameBytes = encoder.encode(name);
    const entry = new DataView(new ArrayBuffer(8 + nameBytes.length + 4 + 8 * dims.length + 4 + 8));
    let at = 0;
    entry.setBigUint64(at, BigInt(nameBytes.length), true);
    new Uint8Array(entry.buffer).set(nameBytes, (at += 8));
    entry.setUint32((at += nameBytes.length), dims.length, true);
    at += 4;
    for (const dim of dims) {
      entry.setBigUint64(at, BigInt(dim), true);
      at += 8;
    }
    entry.setUint32(at, tensorType, true);
    entry.setBigUint64(at + 4, BigInt(offset), true);
    table.push(new Uint8Array(entry.buffer));
    offset += padded(tensorBytes(dims, tensorType));
  }
  const file = await open(path, "w");
  try {
    let written = 0;
    const write = async (bytes) => {
      await file.write(bytes);
      written += bytes.length;
    };
    await write(head);
    for (const entry of table) await write(entry);
    await write(new Uint8Array(padded(written) - written));
    const random = generator(0x5eed);
    for (const [, dims, tensorType] of tensors) {
      const bytes = randomTensor(dims, tensorType, random);
      await write(bytes);
      await write(new Uint8Array(padded(bytes.length) - bytes.length));
    }
  } finally {
    await file.close();
  }
}

function padded(length) {
  return Math.ceil(length / ALIGNMENT) * ALIGNMENT;
}

function tensorBytes(dims, type) {
  const rows = dims.slice(1).reduce((a, b) => a * b, 1);
  return rows * rowBytes(type, dims[0]);
}

/** xorshift32: fast enough for a billion weights. */
function generator(seed) {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
}

/**
 * Random weights of plausible scale (about ±1/sqrt(cols)), so activations stay
 * finite: norms near 1, biases near 0, matrices uniform.
 */
function randomTensor(dims, type, random) {
  const cols = dims[0];
  const bytes = new Uint8Array(tensorBytes(dims, type));
  if (type === GgmlType.F32) {
    const values = new Float32Array(bytes.buffer);
    const isNorm = dims.length === 1 && cols > 0;
    for (let i = 0; i < values.length; i++) values[i] = (isNorm ? 1 : 0) + ((random() / 2 ** 32) * 2 - 1) * 0.1;
    return bytes;
  }
  const scale = 1 / Math.sqrt(cols);
  if (type === GgmlType.F16) {
    const table = Uint16Array.from({ length: 4096 }, (_, i) => f32ToF16(((i / 4095) * 2 - 1) * scale));
    const halves = new Uint16Array(bytes.buffer);
    for (let i = 0; i < halves.length; i++) halves[i] = table[random() & 4095];
    return bytes;
  }
  // Q8_0 (f16 scale + 32 int8), Q4_0 (f16 scale + 16 bytes of nibbles), Q5_0 (f16 scale + 4 bytes
  // of fifth bits + 16 of nibbles) and Q5_1 (Q5_0's with an f16 minimum after the scale, here -16
  // scales so the values center on zero): random quants, one scale.
  const blockBytes = typeInfo(type).bytesPerBlock;
  const levels = type === GgmlType.Q8_0 ? 127 : type === GgmlType.Q5_0 || type === GgmlType.Q5_1 ? 16 : 8;
  const d = f32ToF16(scale / levels);
  const m = f32ToF16(-scale);
  const words = new Uint32Array(Math.ceil(bytes.length / 4));
  for (let i = 0; i < words.length; i++) words[i] = random();
  bytes.set(new Uint8Array(words.buffer, 0, bytes.length));
  for (let block = 0; block < bytes.length; block += blockBytes) {
    bytes[block] = d & 0xff;
    bytes[block + 1] = d >>> 8;
    if (type !== GgmlType.Q5_1) continue;
    bytes[block + 2] = m & 0xff;
    bytes[block + 3] = m >>> 8;
  }
  return bytes;
}
