import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { before, describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { GgmlType, type GgufValue, GgufValueType } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
import { assertLlamaCppCanRead, assertModelFile } from "../src/validate.js";
import { skipWithoutStories, STORIES_GGUF } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing } from "./wasm-link.js";

const LOAD_CHILD = fileURLToPath(new URL("./load-child.js", import.meta.url));

/** Where the `u64 length | bytes` encoding of `text` starts in `bytes` (a metadata key or tensor name). */
function stringAt(bytes: Buffer, text: string): number {
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  const at = bytes.indexOf(Buffer.concat([length, Buffer.from(text)]));
  assert.ok(at >= 0, `"${text}" is not in the file`);
  return at;
}

/** The offset of the value of a scalar metadata key: after the key and its u32 value type. */
const valueAt = (bytes: Buffer, key: string) => stringAt(bytes, key) + 8 + Buffer.byteLength(key) + 4;
/** The offset of a tensor info's first dimension: after its name and its u32 n_dims. */
const shapeAt = (bytes: Buffer, name: string) => stringAt(bytes, name) + 8 + Buffer.byteLength(name) + 4;

interface Mutant {
  /** What was changed, and what the error's field must name. */
  name: string;
  field: string;
  mutate(bytes: Buffer): void;
}

/**
 * Corruptions of stories260K each of which, before the header was validated,
 * aborted the process (GGML_ASSERT, or node's fs.read asserting on a length
 * of 2^31 or more) or took minutes and gigabytes before failing.
 */
const MUTANTS: Mutant[] = [
  { name: "first key's length 2^31", field: "metadata key #0 (string length)", mutate: (b) => b.writeBigUInt64LE(2n ** 31n, 24) },
  { name: "first key's length 2^63", field: "metadata key #0 (string length)", mutate: (b) => b.writeBigUInt64LE(2n ** 63n, 24) },
  { name: "block_count 65535", field: "llama.block_count", mutate: (b) => b.writeUInt32LE(65535, valueAt(b, "llama.block_count")) },
  {
    name: "rms epsilon NaN",
    field: "llama.attention.layer_norm_rms_epsilon",
    mutate: (b) => b.writeFloatLE(Number.NaN, valueAt(b, "llama.attention.layer_norm_rms_epsilon")),
  },
  {
    name: "rms epsilon -1",
    field: "llama.attention.layer_norm_rms_epsilon",
    mutate: (b) => b.writeFloatLE(-1, valueAt(b, "llama.attention.layer_norm_rms_epsilon")),
  },
  {
    name: "a tensor name's length one longer",
    field: "tensor",
    mutate: (b) => b.writeBigUInt64LE(BigInt("blk.0.attn_q.weight".length + 1), stringAt(b, "blk.0.attn_q.weight")),
  },
  {
    name: "a tensor's data offset past the end",
    field: 'tensor "output_norm.weight" offset',
    // One dimension (u64), the type (u32), then the offset: an aligned one far past the file's end.
    mutate: (b) => b.writeBigUInt64LE(BigInt(b.length) * 64n, shapeAt(b, "output_norm.weight") + 8 + 4),
  },
  { name: "head_count 0", field: "llama.attention.head_count", mutate: (b) => b.writeUInt32LE(0, valueAt(b, "llama.attention.head_count")) },
  {
    name: "head_count_kv 3, not dividing 8 heads",
    field: "llama.attention.head_count_kv",
    mutate: (b) => b.writeUInt32LE(3, valueAt(b, "llama.attention.head_count_kv")),
  },
  {
    name: "token_embd for 511 tokens, the vocabulary holding 512",
    field: 'tensor "token_embd.weight"',
    mutate: (b) => b.writeBigUInt64LE(511n, shapeAt(b, "token_embd.weight") + 8),
  },
  // stories260K's head size is 64 / 8 = 8: RoPE must turn all of it (llama), an even count of at most 8 (ggml's rope).
  ...[1, 4096, 65535, 2 ** 32 - 1, 0].map(
    (count): Mutant => ({
      name: `rope.dimension_count ${count}`,
      field: "llama.rope.dimension_count",
      mutate: (b) => b.writeUInt32LE(count, valueAt(b, "llama.rope.dimension_count")),
    }),
  ),
  {
    name: "feed_forward_length 0 (ffn tensors shaped [64, 0])",
    field: "llama.feed_forward_length",
    mutate: (b) => b.writeUInt32LE(0, valueAt(b, "llama.feed_forward_length")),
  },
  {
    // Two dimensions (u64 each), then the type: I32 takes F32's bytes, so the data stays where llama.cpp expects it,
    // and its first matrix multiplication reached a null dot product (SIGSEGV).
    name: "a weight's type F32 -> I32",
    field: 'tensor "blk.0.attn_q.weight"',
    mutate: (b) => b.writeUInt32LE(GgmlType.I32, shapeAt(b, "blk.0.attn_q.weight") + 16),
  },
  {
    // Same lengths, so only the texts change: llama.cpp's SentencePiece tokenizer then finds no token to spell a
    // newline with, and the uncaught std::out_of_range ended the process while node-llama-cpp loaded the model
    // (it tokenizes a test text). A vocabulary missing only some byte tokens loads: byte-fallback.test.ts.
    name: "every byte token renamed (<0x0A> -> <0y0A>)",
    field: "tokenizer.ggml.tokens",
    mutate: (b) => {
      for (let at = b.indexOf("<0x"); at >= 0; at = b.indexOf("<0x", at + 1)) if (b[at + 5] === 0x3e) b[at + 2] = 0x79;
    },
  },
  {
    name: "feed_forward_length 171, one less than ffn_up's rows",
    field: "llama.feed_forward_length",
    mutate: (b) => b.writeUInt32LE(171, valueAt(b, "llama.feed_forward_length")),
  },
];

/** A model rewritten with `extra` metadata (keys it lacks, so its bytes cannot just be patched). */
async function writeWithMetadata(from: string, path: string, extra: Record<string, GgufValue>): Promise<void> {
  const source = await readGguf(from);
  const metadata = new Map([...source.metadata, ...Object.entries(extra)]);
  await writeGgufFile(path, {
    metadata,
    tensors: source.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: source.tensorData(t) })),
  });
}

/** Corruptions that add keys, each aborting llama.cpp (GGML_ASSERT) before. */
const ADDED_KEYS: { name: string; field: string; extra: Record<string, GgufValue> }[] = [
  {
    name: "expert_used_count 4 > expert_count 2",
    field: "llama.expert_used_count",
    extra: {
      "llama.expert_count": { type: GgufValueType.UINT32, value: 2 },
      "llama.expert_used_count": { type: GgufValueType.UINT32, value: 4 },
    },
  },
  { name: "an empty metadata key", field: "metadata key #", extra: { "": { type: GgufValueType.STRING, value: "x" } } },
  // Read as a C string, this key is empty to llama.cpp (the fuzzer's gguf-header seed 7 case 2198).
  { name: "a metadata key starting with NUL", field: "metadata key #", extra: { "\0\0tokenizer.x": { type: GgufValueType.UINT32, value: 1 } } },
  {
    // WordPiece has no byte fallback: llama.cpp reached a GGML_ABORT rendering stories260K's byte tokens at load.
    name: 'tokenizer.ggml.model "bert" with byte tokens',
    field: "tokenizer.ggml.token_type",
    extra: { "tokenizer.ggml.model": { type: GgufValueType.STRING, value: "bert" } },
  },
  {
    name: "an unknown rope scaling type",
    field: "llama.rope.scaling.type",
    extra: { "llama.rope.scaling.type": { type: GgufValueType.STRING, value: "spiral" } },
  },
];

describe("corrupt GGUF files are MODEL_FORMAT naming the field, before llama.cpp reads them", { skip: skipWithoutStories }, () => {
  const cases: { name: string; field: string; path: string }[] = [];
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-corrupt-gguf-"));
    const original = await readFile(STORIES_GGUF);
    for (const [i, { name, field, mutate }] of MUTANTS.entries()) {
      const bytes = Buffer.from(original);
      mutate(bytes);
      const path = join(dir, `mutant-${i}.gguf`);
      await writeFile(path, bytes);
      cases.push({ name, field, path });
    }
    for (const [i, { name, field, extra }] of ADDED_KEYS.entries()) {
      const path = join(dir, `added-${i}.gguf`);
      await writeWithMetadata(STORIES_GGUF, path, extra);
      cases.push({ name, field, path });
    }
  });

  test("each mutant, loaded (and generated from) in a child process, is refused at load without aborting it", () => {
    assertRefusedInChild(cases);
  });
});

/**
 * Loads (and generates from) each case in a child process: each must be MODEL_FORMAT naming its field and
 * its file (`file`, else `path`), the child alive. A case without a field must load and generate.
 */
function assertRefusedInChild(cases: { name: string; field?: string; path: string; file?: string }[]): void {
  const child = spawnSync(process.execPath, [LOAD_CHILD, ...cases.map((c) => c.path)], { encoding: "utf8", timeout: 120_000 });
  const lines = child.stdout.trim().split("\n").filter(Boolean);
  const last = cases[lines.length]?.name;
  assert.equal(child.status, 0, `the child died (signal ${child.signal}) at mutant "${last}": ${child.stderr.slice(-2000)}`);
  assert.equal(lines.length, cases.length);
  for (const [i, { name, field, path, file }] of cases.entries()) {
    const outcome = JSON.parse(lines[i]!) as { path: string; loaded?: boolean; code?: string; field?: string; message?: string };
    assert.equal(outcome.path, path);
    if (field === undefined) {
      assert.equal(outcome.loaded, true, `${name}: ${lines[i]}`);
      continue;
    }
    assert.equal(outcome.code, "MODEL_FORMAT", `${name}: ${lines[i]}`);
    assert.ok(outcome.field?.startsWith(field), `${name}: field ${outcome.field}, expected ${field}`);
    assert.ok(outcome.message?.includes(file ?? path), `${name}: ${outcome.message}`);
  }
}

/**
 * Head and RoPE sizes on the random models (whose key_length is given): each
 * aborted llama.cpp in its graph (qwen2/qwen3/phi3 assert n_embd_head ==
 * n_embd_head_k and == n_rot; ggml's views and reshapes assert on sizes from
 * head counts that disagree with the tensors).
 */
const RANDOM_MUTANTS: { architecture: string; field: string; changes: Record<string, number> }[] = [
  ...["qwen2", "phi3"].flatMap((architecture) => [
    ...[1, 65535].map((value) => ({ architecture, field: `${architecture}.attention.key_length`, changes: { "attention.key_length": value } })),
    ...[65536, 2 ** 31 - 1].map((value) => ({ architecture, field: `${architecture}.attention.head_count`, changes: { "attention.head_count": value } })),
  ]),
  { architecture: "qwen3", field: "qwen3.rope.dimension_count", changes: { "rope.dimension_count": 4 } },
  { architecture: "phi3", field: "phi3.rope.dimension_count", changes: { "rope.dimension_count": 0 } },
  { architecture: "phi3", field: "phi3.rope.dimension_count", changes: { "rope.dimension_count": 7 } },
  { architecture: "gemma3", field: "gemma3.rope.dimension_count", changes: { "rope.dimension_count": 4096 } },
  { architecture: "gemma3", field: "gemma3.feed_forward_length", changes: { feed_forward_length: 0 } },
];

describe("corrupt head and RoPE sizes of every architecture are MODEL_FORMAT naming the field", { skip: wasmBuildMissing }, () => {
  const cases: { name: string; field: string; path: string }[] = [];
  before(async () => {
    const { writeRandomGguf } = await loadWasmKit();
    const dir = await mkdtemp(join(tmpdir(), "infer-corrupt-heads-"));
    for (const [i, { architecture, field, changes }] of RANDOM_MUTANTS.entries()) {
      const source = join(dir, `${architecture}.gguf`);
      await writeRandomGguf(source, { architecture, seed: 7 });
      const extra = Object.fromEntries(
        Object.entries(changes).map(([key, value]): [string, GgufValue] => [`${architecture}.${key}`, { type: GgufValueType.UINT32, value }]),
      );
      const path = join(dir, `mutant-${i}.gguf`);
      await writeWithMetadata(source, path, extra);
      cases.push({ name: `${architecture} ${JSON.stringify(changes)}`, field, path });
    }
  });

  test("each mutant, loaded in a child process, is refused at load without aborting it", () => {
    assertRefusedInChild(cases);
  });
});

describe("the adapter and the draft model are checked as well", { skip: skipWithoutStories }, () => {
  const refusal = (file: string, field: string) => (error: unknown) => {
    assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
    assert.equal(error.details.file, file);
    assert.equal(error.details.field, field);
    return true;
  };

  test("a corrupt draft model, an adapter with a NaN alpha, an adapter passed as a model", async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-corrupt-parts-"));
    const draft = join(dir, "draft.gguf");
    const bytes = await readFile(STORIES_GGUF);
    bytes.writeUInt32LE(65535, valueAt(bytes, "llama.block_count"));
    await writeFile(draft, bytes);
    await assert.rejects(assertLlamaCppCanRead(STORIES_GGUF, { draftModel: draft }), refusal(draft, "llama.block_count"));

    const adapter = join(dir, "nan-alpha.gguf");
    const rank = 4;
    await writeGgufFile(adapter, {
      metadata: {
        "general.architecture": "llama",
        "general.type": "adapter",
        "adapter.type": "lora",
        "adapter.lora.alpha": { type: GgufValueType.FLOAT32, value: Number.NaN },
      },
      tensors: [
        { name: "blk.0.attn_q.weight.lora_a", shape: [64, rank], type: GgmlType.F32, data: new Float32Array(64 * rank) },
        { name: "blk.0.attn_q.weight.lora_b", shape: [rank, 64], type: GgmlType.F32, data: new Float32Array(64 * rank) },
      ],
    });
    await assert.rejects(assertLlamaCppCanRead(STORIES_GGUF, { adapterPath: adapter }), refusal(adapter, "adapter.lora.alpha"));
    await assert.rejects(assertLlamaCppCanRead(STORIES_GGUF, { draftModel: adapter }), refusal(adapter, "general.type"));
  });
});

/** A LoRA adapter file of `architecture` holding `pairs`: name -> [lora_a shape, lora_b shape] (ggml order), F32 unless `types` says. */
async function writeAdapter(path: string, architecture: string, pairs: Record<string, [number[], number[]]>, types: Record<string, GgmlType> = {}) {
  const tensor = (name: string, shape: number[]) => {
    const type = types[name] ?? GgmlType.F32;
    const count = shape.reduce((a, b) => a * b, 1);
    // Small values: a valid adapter must still generate. I32 data only needs its bytes.
    const data = type === GgmlType.F32 ? new Float32Array(count).fill(0.01) : new Uint8Array(count * 4);
    return { name, shape, type, data };
  };
  await writeGgufFile(path, {
    metadata: { "general.architecture": architecture, "general.type": "adapter", "adapter.type": "lora" },
    tensors: Object.entries(pairs).flatMap(([name, [a, b]]) => [tensor(`${name}.lora_a`, a), tensor(`${name}.lora_b`, b)]),
  });
}

/**
 * Adapters that llama.cpp's LoRA loader accepts but whose first generation died: an I32 tensor (the fuzzer's
 * gguf-adapter seed 31 case 67787: no dot product for it, SIGSEGV), and shapes its loader does not compare
 * (found by hand from there): dimensions past the second, the two ranks of a token_embd pair, and a
 * token_embd LoRA on a model that reuses token_embd as its output. Each aborted in ggml_mul_mat.
 */
describe("LoRA adapters whose types or shapes broke llama.cpp's graph are MODEL_FORMAT naming the tensor", { skip: skipWithoutStories || wasmBuildMissing }, () => {
  const cases: { name: string; field?: string; path: string; file?: string }[] = [];
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-corrupt-lora-"));
    const { writeRandomGguf } = await loadWasmKit();
    const tied = join(dir, "gemma3.gguf"); // no output.weight: gemma3 always ties it to token_embd
    await writeRandomGguf(tied, { architecture: "gemma3", seed: 7 });
    const { shape: [embd, vocab] } = (await assertModelFile(tied)).tensorByName("token_embd.weight")!;
    const mutants: { name: string; field?: string; model: string; pairs: Record<string, [number[], number[]]>; types?: Record<string, GgmlType> }[] = [
      { name: "a valid token_embd LoRA", model: STORIES_GGUF, pairs: { "token_embd.weight": [[2, 512], [2, 64]] } },
      { name: "a valid attn_q LoRA", model: STORIES_GGUF, pairs: { "blk.0.attn_q.weight": [[64, 2], [2, 64]] } },
      {
        name: "an I32 lora_a",
        field: 'tensor "blk.0.attn_q.weight.lora_a"',
        model: STORIES_GGUF,
        pairs: { "blk.0.attn_q.weight": [[64, 2], [2, 64]] },
        types: { "blk.0.attn_q.weight.lora_a": GgmlType.I32 },
      },
      { name: "a 3-D lora_a", field: 'tensor "blk.0.attn_q.weight.lora_a"', model: STORIES_GGUF, pairs: { "blk.0.attn_q.weight": [[64, 2, 3], [2, 64]] } },
      { name: "a 3-D lora_b", field: 'tensor "blk.0.attn_q.weight.lora_b"', model: STORIES_GGUF, pairs: { "blk.0.attn_q.weight": [[64, 2], [2, 64, 3]] } },
      { name: "token_embd ranks 2 and 3", field: 'tensor "token_embd.weight.lora_b"', model: STORIES_GGUF, pairs: { "token_embd.weight": [[2, 512], [3, 64]] } },
      { name: "token_embd LoRA, output tied", field: 'tensor "token_embd.weight.lora_a"', model: tied, pairs: { "token_embd.weight": [[2, vocab!], [2, embd!]] } },
    ];
    for (const [i, { name, field, model, pairs, types }] of mutants.entries()) {
      const file = join(dir, `adapter-${i}.gguf`);
      await writeAdapter(file, model === tied ? "gemma3" : "llama", pairs, types);
      cases.push({ name, field, path: `${model}::${file}`, file });
    }
  });

  test("each, loaded with its model in a child process, is refused at load without aborting it; the valid ones generate", () => {
    assertRefusedInChild(cases);
  });
});

describe("valid models pass the checks", () => {
  test("stories260K", { skip: skipWithoutStories }, async () => {
    const header = await assertModelFile(STORIES_GGUF);
    assert.equal(header.tensors.length, 48);
  });

  test("the random models of every architecture the wasm backend writes", { skip: wasmBuildMissing }, async () => {
    const { writeRandomGguf } = await loadWasmKit();
    const dir = await mkdtemp(join(tmpdir(), "infer-valid-gguf-"));
    for (const architecture of ["llama", "qwen2", "qwen3", "gemma3", "phi3"]) {
      for (const type of [GgmlType.F32, GgmlType.F16, GgmlType.Q8_0]) {
        const path = join(dir, `${architecture}-${type}.gguf`);
        await writeRandomGguf(path, { architecture, seed: 7, type });
        const header = await assertModelFile(path);
        assert.ok(header.tensors.length > 0, architecture);
      }
    }
    // Partial rotary embeddings (phi3, gemma3): an even count below the head size is valid there.
    for (const architecture of ["phi3", "gemma3"]) {
      const source = join(dir, `${architecture}-${GgmlType.F32}.gguf`);
      const headSize = (await assertModelFile(source)).metadata.get(`${architecture}.attention.key_length`)!.value as number;
      const partial = join(dir, `${architecture}-partial-rope.gguf`);
      await writeWithMetadata(source, partial, { [`${architecture}.rope.dimension_count`]: { type: GgufValueType.UINT32, value: headSize / 2 } });
      await assertModelFile(partial);
    }
  });
});
