// GGUF reader: the shared stories260K model, writer round trips, and one
// hand-built broken file per validation rule.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  CODEC_TYPES,
  GgmlType,
  GgufValueType,
  PackedStrings,
  dequantize,
  getArray,
  getBoolean,
  getNumber,
  getNumberArray,
  getString,
  getStringArray,
  parseGguf,
  parseGgufHeader,
  quantize,
  typeName,
  writeGguf,
  type GgufArray,
  type GgufValue,
} from "../src/index.js";
import { readGguf, readGgufHeader } from "../src/node/index.js";
import { ByteBuilder, SHARED_MODELS, assertInferenceError, assertRejectsWith, sharedModelsSkip } from "./helpers.js";

const STORIES = join(SHARED_MODELS, "stories260K", "stories260K.gguf");
const STORIES_BIN = join(SHARED_MODELS, "stories260K", "stories260K.bin");

/** A read value with its packed string arrays as plain ones, to compare with what was written. */
function unpacked(value: GgufValue | undefined): unknown {
  if (value?.type !== GgufValueType.ARRAY) return value;
  if (value.value instanceof PackedStrings) return { ...value, value: value.value.toArray() };
  if (value.itemType === GgufValueType.ARRAY) return { ...value, value: (value.value as GgufArray[]).map(unpacked) };
  return value;
}

describe("stories260K.gguf (shared model)", { skip: sharedModelsSkip() }, () => {
  it("reads the header, metadata and tensor table", async () => {
    const file = await readGguf(STORIES);
    assert.equal(file.version, 3);
    assert.equal(file.alignment, 32);
    assert.equal(file.dataOffset % 32, 0);
    assert.equal(getString(file.metadata, "general.architecture", true), "llama");
    assert.equal(getNumber(file.metadata, "llama.embedding_length", true), 64);
    assert.equal(getNumber(file.metadata, "llama.block_count", true), 5);
    assert.equal(getNumber(file.metadata, "llama.attention.head_count", true), 8);
    assert.equal(getNumber(file.metadata, "llama.attention.head_count_kv", true), 4);
    assert.equal(getNumber(file.metadata, "llama.feed_forward_length", true), 172);
    assert.equal(file.metadata.get("llama.embedding_length")?.type, GgufValueType.UINT32);
    const tokens = getStringArray(file.metadata, "tokenizer.ggml.tokens", true);
    assert.equal(tokens.length, 512);
    assert.deepEqual(tokens.toArray().slice(0, 3), ["<unk>", "<s>", "</s>"]);
    const scores = getNumberArray(file.metadata, "tokenizer.ggml.scores", true);
    assert.ok(scores instanceof Float32Array && scores.length === 512);
    assert.equal(getArray(file.metadata, "tokenizer.ggml.token_type", true).itemType, GgufValueType.INT32);
    assert.equal(getNumberArray(file.metadata, "tokenizer.ggml.token_type", true).length, 512);

    assert.equal(file.tensors.length, 3 + 5 * 9);
    const embedding = file.tensorByName("token_embd.weight")!;
    assert.deepEqual(embedding.shape, [64, 512]);
    assert.equal(embedding.type, GgmlType.F32);
    assert.equal(embedding.byteLength, 64 * 512 * 4);
    assert.deepEqual(file.tensorByName("blk.4.ffn_down.weight")?.shape, [172, 64]);
    assert.deepEqual(file.tensorByName("blk.0.attn_k.weight")?.shape, [64, 32]);
    assert.equal(file.tensorByName("nope"), undefined);
    const data = file.tensorData(embedding);
    assert.equal(data.buffer, file.bytes.buffer, "tensorData is a view, not a copy");
  });

  it("holds the same weights as the llama2.c checkpoint of the same model", async () => {
    const file = await readGguf(STORIES);
    const bin = await readFile(STORIES_BIN);
    const header = new Int32Array(bin.buffer.slice(bin.byteOffset, bin.byteOffset + 28));
    const [dim, hidden, layers, , , vocab] = Array.from(header) as number[];
    const floats = (from: number, count: number) => new Float32Array(bin.buffer.slice(bin.byteOffset + 28 + 4 * from, bin.byteOffset + 28 + 4 * (from + count)));
    const read = (name: string) => {
      const info = file.tensorByName(name)!;
      return dequantize(info.type, file.tensorData(info), info.byteLength / 4);
    };
    // llama2.c order: embeddings, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final.
    const kvDim = 32;
    assert.deepEqual(read("token_embd.weight"), floats(0, vocab! * dim!));
    assert.deepEqual(read("blk.0.attn_norm.weight"), floats(vocab! * dim!, dim!));
    const finalNorm = vocab! * dim! + layers! * (2 * dim! + 2 * dim! * dim! + 2 * dim! * kvDim + 3 * dim! * hidden!);
    assert.deepEqual(read("output_norm.weight"), floats(finalNorm, dim!));
  });

  it("names the file and key when a required key is missing or mistyped", async () => {
    const file = await readGguf(STORIES);
    assertInferenceError(() => getNumber(file.metadata, "general.architecture", true), "MODEL_FORMAT", [STORIES, "general.architecture", "STRING"]);
    assertInferenceError(() => getString(file.metadata, "llama.missing", true), "MODEL_FORMAT", [STORIES, "llama.missing", "missing"]);
    assertInferenceError(() => getStringArray(file.metadata, "tokenizer.ggml.scores"), "MODEL_FORMAT", ["tokenizer.ggml.scores", "FLOAT32"]);
    assertInferenceError(() => getBoolean(file.metadata, "llama.block_count"), "MODEL_FORMAT", ["llama.block_count", "BOOL"]);
    assert.equal(getString(file.metadata, "llama.missing"), undefined);
  });

  it("is rewritten byte for byte by writeGguf", async () => {
    const file = await readGguf(STORIES);
    const rewritten = writeGguf({
      metadata: file.metadata,
      tensors: file.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: file.tensorData(t) })),
    });
    assert.ok(Buffer.from(rewritten).equals(Buffer.from(file.bytes)));
  });

  it("fails with MODEL_NOT_FOUND for a missing path", async () => {
    await assertRejectsWith(() => readGguf(`${STORIES}.absent`), "MODEL_NOT_FOUND", [`${STORIES}.absent`]);
  });
});

describe("GGUF round trip through writeGguf", () => {
  const values = Float32Array.from({ length: 512 }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 5)));

  it("keeps every metadata type and value", () => {
    const bytes = writeGguf({
      metadata: {
        "general.architecture": "llama",
        "general.name": "tiny ü",
        flag: true,
        count: 7,
        negative: -3,
        ratio: 0.5,
        big: 2n ** 40n,
        tokens: ["a", "b", "ü", ""],
        ints: [1, -2, 3],
        floats: [0.5, 1.25],
        bools: [true, false],
        scores: Float32Array.from([0.25, -1]),
        types: Int32Array.from([1, 2, 6]),
        wide: BigUint64Array.from([2n ** 63n]),
        u8: { type: GgufValueType.UINT8, value: 200 },
        i16: { type: GgufValueType.INT16, value: -30000 },
        f64: { type: GgufValueType.FLOAT64, value: Math.PI },
        i64: { type: GgufValueType.INT64, value: -(2n ** 62n) },
        u16s: { type: GgufValueType.ARRAY, itemType: GgufValueType.UINT16, value: Uint16Array.from([65535, 0]) },
        nested: {
          type: GgufValueType.ARRAY,
          itemType: GgufValueType.ARRAY,
          value: [{ type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: ["x", "y"] }],
        },
      },
    });
    const meta = parseGguf(bytes, "roundtrip.gguf").metadata;
    const expect = (key: string, type: GgufValueType, value: unknown) => assert.deepEqual(meta.get(key), { type, value }, key);
    expect("general.architecture", GgufValueType.STRING, "llama");
    expect("general.name", GgufValueType.STRING, "tiny ü");
    expect("flag", GgufValueType.BOOL, true);
    expect("count", GgufValueType.UINT32, 7);
    expect("negative", GgufValueType.INT32, -3);
    expect("ratio", GgufValueType.FLOAT32, 0.5);
    expect("big", GgufValueType.UINT64, 2n ** 40n);
    expect("u8", GgufValueType.UINT8, 200);
    expect("i16", GgufValueType.INT16, -30000);
    expect("f64", GgufValueType.FLOAT64, Math.PI);
    expect("i64", GgufValueType.INT64, -(2n ** 62n));
    const array = (key: string, itemType: GgufValueType, value: unknown) =>
      assert.deepEqual(unpacked(meta.get(key)), { type: GgufValueType.ARRAY, itemType, value }, key);
    array("tokens", GgufValueType.STRING, ["a", "b", "ü", ""]);
    array("ints", GgufValueType.INT32, Int32Array.from([1, -2, 3]));
    array("floats", GgufValueType.FLOAT32, Float32Array.from([0.5, 1.25]));
    array("bools", GgufValueType.BOOL, [true, false]);
    array("scores", GgufValueType.FLOAT32, Float32Array.from([0.25, -1]));
    array("types", GgufValueType.INT32, Int32Array.from([1, 2, 6]));
    array("wide", GgufValueType.UINT64, BigUint64Array.from([2n ** 63n]));
    array("u16s", GgufValueType.UINT16, Uint16Array.from([65535, 0]));
    array("nested", GgufValueType.ARRAY, [{ type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: ["x", "y"] }]);
    assert.equal(meta.has("general.alignment"), false, "the default alignment is not written");
    assert.equal(getNumber(meta, "big"), 2 ** 40);
  });

  it("stores every codec type at aligned offsets, encoded with quantize()", () => {
    const tensors = CODEC_TYPES.map((type) => ({ name: `t.${typeName(type)}`, shape: [256, 2], type, data: values }));
    const file = parseGguf(writeGguf({ metadata: { "general.architecture": "test" }, tensors }), "types.gguf");
    assert.equal(file.tensors.length, CODEC_TYPES.length);
    for (const type of CODEC_TYPES) {
      const info = file.tensorByName(`t.${typeName(type)}`)!;
      assert.deepEqual(info.shape, [256, 2]);
      assert.equal(info.type, type);
      assert.equal((info.offset - file.dataOffset) % 32, 0);
      assert.deepEqual(file.tensorData(info), quantize(type, values));
      assert.deepEqual(dequantize(type, file.tensorData(info), 512), dequantize(type, quantize(type, values), 512));
    }
  });

  it("writes general.alignment only when not the default, and aligns to it", () => {
    const tensors = [
      { name: "a", shape: [3], type: GgmlType.F32, data: Float32Array.from([1, 2, 3]) },
      { name: "b", shape: [32], type: GgmlType.Q8_0, data: quantize(GgmlType.Q8_0, values.subarray(0, 32)) },
    ];
    const file = parseGguf(writeGguf({ tensors, alignment: 64 }), "aligned.gguf");
    assert.deepEqual(file.metadata.get("general.alignment"), { type: GgufValueType.UINT32, value: 64 });
    assert.equal(file.alignment, 64);
    assert.equal(file.dataOffset % 64, 0);
    assert.equal(file.tensorByName("b")!.offset - file.dataOffset, 64);
    assert.deepEqual(dequantize(GgmlType.F32, file.tensorData(file.tensorByName("a")!), 3), Float32Array.from([1, 2, 3]));
  });

  it("rejects values and tensors it cannot write, naming the key or tensor", () => {
    assertInferenceError(() => writeGguf({ metadata: { small: { type: GgufValueType.UINT8, value: 300 } } }), "INVALID_OPTION", ["small", "UINT8"]);
    assertInferenceError(() => writeGguf({ metadata: { empty: [] } }), "INVALID_OPTION", ["empty"]);
    assertInferenceError(() => writeGguf({ alignment: 48 }), "INVALID_OPTION", ["alignment", "48"]);
    assertInferenceError(
      () => writeGguf({ tensors: [{ name: "w", shape: [32, 2], type: GgmlType.Q8_0, data: new Uint8Array(10) }] }),
      "INVALID_OPTION",
      ['tensor "w"', "68"],
    );
    assertInferenceError(
      () => writeGguf({ tensors: [{ name: "w", shape: [30], type: GgmlType.Q8_0, data: new Float32Array(30) }] }),
      "INVALID_OPTION",
      ['tensor "w"', "block size"],
    );
    const twice = { name: "w", shape: [1], type: GgmlType.F32, data: new Float32Array(1) };
    assertInferenceError(() => writeGguf({ tensors: [twice, twice] }), "INVALID_OPTION", ['tensor "w"', "twice"]);
  });
});

// ---- hand-built broken files ----

interface TinyTensor {
  name: string;
  dims: (number | bigint)[];
  type: number;
  offset: number | bigint;
}

interface TinyOptions {
  version?: number;
  tensorCount?: bigint;
  kvCount?: bigint;
  /** Writes the key/value pairs (default: general.architecture = "llama"). */
  kv?: (b: ByteBuilder) => void;
  tensors?: TinyTensor[];
  alignment?: number;
  dataBytes?: number;
}

const ONE_TENSOR: TinyTensor[] = [{ name: "a", dims: [32], type: GgmlType.F32, offset: 0 }];

/** A small GGUF written field by field; every option breaks one thing. */
function tinyGguf(options: TinyOptions = {}): Uint8Array {
  const tensors = options.tensors ?? ONE_TENSOR;
  const b = new ByteBuilder().u8(0x47, 0x47, 0x55, 0x46).u32(options.version ?? 3);
  b.u64(options.tensorCount ?? BigInt(tensors.length)).u64(options.kvCount ?? 1n);
  if (options.kv) options.kv(b);
  else b.str("general.architecture").u32(GgufValueType.STRING).str("llama");
  for (const t of tensors) {
    b.str(t.name).u32(t.dims.length);
    for (const d of t.dims) b.u64(d);
    b.u32(t.type).u64(t.offset);
  }
  return b.padTo(options.alignment ?? 32).zeros(options.dataBytes ?? 256).bytes();
}

function parseBad(bytes: Uint8Array): () => unknown {
  return () => parseGguf(bytes, "bad.gguf");
}

describe("GGUF validation", () => {
  it("parses the valid tiny file the broken ones derive from", () => {
    const file = parseGguf(tinyGguf(), "tiny.gguf");
    assert.deepEqual(file.tensors[0], { name: "a", shape: [32], type: GgmlType.F32, offset: file.dataOffset, byteLength: 128 });
  });

  it("bad magic", () => {
    const bytes = tinyGguf();
    bytes[3] = 0x4c; // "GGUL"
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", "magic"]);
    assertInferenceError(parseBad(new Uint8Array(0)), "MODEL_FORMAT", ["bad.gguf", "magic"]);
  });

  it("unsupported versions, v1 included", () => {
    assertInferenceError(parseBad(tinyGguf({ version: 1 })), "MODEL_FORMAT", ["bad.gguf", "version", "v1"]);
    assertInferenceError(parseBad(tinyGguf({ version: 9 })), "MODEL_FORMAT", ["bad.gguf", "version", "9"]);
    assert.equal(parseGguf(tinyGguf({ version: 2 })).version, 2);
  });

  it("counts beyond the remaining bytes", () => {
    assertInferenceError(parseBad(tinyGguf({ tensorCount: 2n ** 60n })), "MODEL_FORMAT", ["bad.gguf", "tensor_count"]);
    assertInferenceError(parseBad(tinyGguf({ kvCount: 2n ** 64n - 1n })), "MODEL_FORMAT", ["bad.gguf", "metadata_kv_count"]);
    const longKey = tinyGguf({ kv: (b) => b.u64(2n ** 40n) });
    assertInferenceError(parseBad(longKey), "MODEL_FORMAT", ["bad.gguf", "metadata key #0"]);
    const truncated = tinyGguf().subarray(0, 66); // inside the first value, "llama"
    assertInferenceError(parseBad(truncated), "MODEL_FORMAT", ["bad.gguf", 'metadata["general.architecture"]']);
  });

  it("a huge declared array length in a tiny file fails fast", () => {
    const bytes = tinyGguf({
      kv: (b) => b.str("tokenizer.ggml.tokens").u32(GgufValueType.ARRAY).u32(GgufValueType.STRING).u64(2n ** 60n).str("x"),
    });
    assert.ok(bytes.length < 1024);
    const started = performance.now();
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", "tokenizer.ggml.tokens", "array length"]);
    assert.ok(performance.now() - started < 100, "no time spent on the declared items");
    const floats = tinyGguf({ kv: (b) => b.str("s").u32(GgufValueType.ARRAY).u32(GgufValueType.FLOAT32).u64(2n ** 61n) });
    assertInferenceError(parseBad(floats), "MODEL_FORMAT", ['metadata["s"]', "array length"]);
  });

  it("a string of an array longer than the file (a 4 GiB one included) names its index", () => {
    const tokens = (second: (b: ByteBuilder) => ByteBuilder) =>
      tinyGguf({ kv: (b) => second(b.str("tokenizer.ggml.tokens").u32(GgufValueType.ARRAY).u32(GgufValueType.STRING).u64(2n).str("ok")) });
    assertInferenceError(parseBad(tokens((b) => b.u64(2n ** 20n))), "MODEL_FORMAT", ["bad.gguf", 'metadata["tokenizer.ggml.tokens"][1]', "string length"]);
    assertInferenceError(parseBad(tokens((b) => b.u64(2n ** 32n))), "MODEL_FORMAT", ["bad.gguf", 'metadata["tokenizer.ggml.tokens"][1]', "string length"]);
    const fine = parseGguf(tokens((b) => b.str("ü")), "fine.gguf");
    assert.deepEqual(getStringArray(fine.metadata, "tokenizer.ggml.tokens", true).toArray(), ["ok", "ü"]);
  });

  it("unknown metadata value types", () => {
    assertInferenceError(parseBad(tinyGguf({ kv: (b) => b.str("odd").u32(13).u32(0) })), "MODEL_FORMAT", ["bad.gguf", 'metadata["odd"]', "13"]);
    const item = tinyGguf({ kv: (b) => b.str("odd").u32(GgufValueType.ARRAY).u32(42).u64(1) });
    assertInferenceError(parseBad(item), "MODEL_FORMAT", ["bad.gguf", 'metadata["odd"]', "42"]);
  });

  it("duplicate metadata keys", () => {
    const bytes = tinyGguf({
      kvCount: 2n,
      kv: (b) => b.str("k").u32(GgufValueType.UINT32).u32(1).str("k").u32(GgufValueType.UINT32).u32(2),
    });
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", 'metadata["k"]', "twice"]);
  });

  it("unknown tensor types are UNSUPPORTED_DTYPE naming the tensor and type id", () => {
    const bytes = tinyGguf({ tensors: [{ name: "w", dims: [32], type: 99, offset: 0 }] });
    assertInferenceError(parseBad(bytes), "UNSUPPORTED_DTYPE", ["bad.gguf", 'tensor "w"', "99"]);
  });

  it("dimensions that are not positive, too many, or not whole blocks", () => {
    const zero = tinyGguf({ tensors: [{ name: "w", dims: [32, 0], type: GgmlType.F32, offset: 0 }] });
    assertInferenceError(parseBad(zero), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" shape[1]', "not positive"]);
    const five = tinyGguf({ tensors: [{ name: "w", dims: [1, 1, 1, 1, 1], type: GgmlType.F32, offset: 0 }] });
    assertInferenceError(parseBad(five), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" n_dims']);
    const partial = tinyGguf({ tensors: [{ name: "w", dims: [33], type: GgmlType.Q4_0, offset: 0 }] });
    assertInferenceError(parseBad(partial), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" shape[0]', "block size 32"]);
    const huge = tinyGguf({ tensors: [{ name: "w", dims: [2n ** 32n, 2n ** 32n], type: GgmlType.F32, offset: 0 }] });
    assertInferenceError(parseBad(huge), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" shape']);
  });

  it("tensor data beyond the end of the file", () => {
    const bytes = tinyGguf({ tensors: [{ name: "w", dims: [32], type: GgmlType.F32, offset: 256 }] });
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" offset', "beyond"]);
    const big = tinyGguf({ tensors: [{ name: "w", dims: [32], type: GgmlType.F32, offset: 2n ** 63n }] });
    assertInferenceError(parseBad(big), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" offset']);
  });

  it("a tail after the tensor data longer than 1 MiB and than the data itself", () => {
    // One 128-byte tensor: a file may end up to 1 MiB past it (padding, a stray block), not one byte more.
    const withTail = (tail: number) => tinyGguf({ dataBytes: 128 + tail });
    assert.equal(parseGguf(withTail(2 ** 20), "tail.gguf").tensors.length, 1);
    assertInferenceError(parseBad(withTail(2 ** 20 + 1)), "MODEL_FORMAT", ["bad.gguf", "file size", "follow the last tensor's data"]);
    // A tail as long as the tensor data is allowed however long that is.
    const twoMiB = [{ name: "w", dims: [2 ** 19], type: GgmlType.F32, offset: 0 }];
    assert.equal(parseGguf(tinyGguf({ tensors: twoMiB, dataBytes: 2 * 2 ** 21 }), "tail.gguf").tensors.length, 1);
    assertInferenceError(parseBad(tinyGguf({ tensors: twoMiB, dataBytes: 2 * 2 ** 21 + 1 })), "MODEL_FORMAT", ["bad.gguf", "file size"]);
  });

  it("overlapping tensors", () => {
    const bytes = tinyGguf({
      tensors: [
        { name: "a", dims: [32], type: GgmlType.F32, offset: 0 },
        { name: "b", dims: [32], type: GgmlType.F32, offset: 96 },
      ],
    });
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", 'tensor "b" offset', "overlaps", '"a"']);
  });

  it("misaligned tensor offsets", () => {
    const bytes = tinyGguf({ tensors: [{ name: "w", dims: [4], type: GgmlType.F32, offset: 16 }] });
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", 'tensor "w" offset', "alignment 32"]);
  });

  it("duplicate tensor names", () => {
    const bytes = tinyGguf({
      tensors: [
        { name: "w", dims: [8], type: GgmlType.F32, offset: 0 },
        { name: "w", dims: [8], type: GgmlType.F32, offset: 32 },
      ],
    });
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.gguf", 'tensor "w"', "twice"]);
  });

  it("alignment that is not a power of two (or not UINT32)", () => {
    const withAlignment = (type: GgufValueType, write: (b: ByteBuilder) => void) =>
      tinyGguf({ kv: (b) => write(b.str("general.alignment").u32(type)), alignment: 8, tensors: [] });
    assertInferenceError(parseBad(withAlignment(GgufValueType.UINT32, (b) => b.u32(24))), "MODEL_FORMAT", ["bad.gguf", "general.alignment", "24"]);
    assertInferenceError(parseBad(withAlignment(GgufValueType.UINT32, (b) => b.u32(0))), "MODEL_FORMAT", ["bad.gguf", "general.alignment"]);
    assertInferenceError(parseBad(withAlignment(GgufValueType.FLOAT32, (b) => b.f32(32))), "MODEL_FORMAT", ["bad.gguf", "general.alignment", "UINT32"]);
    assert.equal(parseGguf(withAlignment(GgufValueType.UINT32, (b) => b.u32(8))).alignment, 8);
  });
});

describe("GGUF header read alone", () => {
  // 700,000 strings of 6 bytes: a 9.8 MB header, past the first prefix read (4 MiB) and the next (16 MiB is the whole file).
  const words = Array.from({ length: 700_000 }, (_, i) => `w${String(i).padStart(5, "0")}`);
  const weights = Float32Array.from({ length: 256 }, (_, i) => i / 7);
  const file = writeGguf({
    metadata: { "general.architecture": "llama", "tokenizer.ggml.tokens": words, "general.name": "long header" },
    tensors: [{ name: "token_embd.weight", shape: [32, 8], type: GgmlType.F32, data: weights }],
  });

  async function withFile(bytes: Uint8Array, run: (path: string) => Promise<void>): Promise<void> {
    const folder = await mkdtemp(join(tmpdir(), "infer-gguf-header-"));
    try {
      const path = join(folder, "model.gguf");
      await writeFile(path, bytes);
      await run(path);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  }

  it("readGgufHeader reads a header longer than its first prefix, as readGguf reads it whole", async () => {
    await withFile(file, async (path) => {
      const whole = parseGguf(file, path);
      assert.ok(whole.dataOffset > 4 * 2 ** 20, `the header is ${whole.dataOffset} bytes`);
      const header = await readGgufHeader(path);
      assert.equal(header.dataOffset, whole.dataOffset);
      assert.equal(getString(header.metadata, "general.name"), "long header");
      const tokens = getStringArray(header.metadata, "tokenizer.ggml.tokens")!;
      assert.equal(tokens.length, words.length);
      assert.equal(tokens.get(699_999), "w699999");
      assert.deepEqual(header.tensors, (await readGguf(path)).tensors);
    });
  });

  it("readGguf into memory that is handed back: the header's prefixes come and go, only the tensor data stays", async () => {
    await withFile(file, async (path) => {
      const whole = parseGguf(file, path);
      const events: string[] = [];
      const live = new Set<Uint8Array>();
      const read = await readGguf(path, {
        allocate: (bytes) => {
          const view = new Uint8Array(bytes);
          events.push(`allocate ${bytes}`);
          live.add(view);
          return view;
        },
        release: (view) => {
          assert.ok(live.delete(view), "released once, and only what was allocated");
          events.push(`release ${view.length}`);
        },
      });
      const dataBytes = file.length - whole.dataOffset;
      // A 4 MiB prefix is too short for this header; the next, 16 MiB, is the whole file.
      assert.deepEqual(events, [`allocate ${4 * 2 ** 20}`, `release ${4 * 2 ** 20}`, `allocate ${file.length}`, `release ${file.length}`, `allocate ${dataBytes}`]);
      assert.deepEqual([...live], [read.bytes]);
      const info = read.tensorByName("token_embd.weight")!;
      assert.deepEqual(new Float32Array(read.tensorData(info).slice().buffer), weights);
      assert.equal(getStringArray(read.metadata, "tokenizer.ggml.tokens")!.get(123_456), "w123456");
    });
  });

  it("a header without tensors that ends in a string or bool array is read whole or not at all", () => {
    // Nothing follows the last array, so only the array's own checks can tell its bytes ran past the prefix.
    for (const last of [["", "ab", "cdé"], [true, false, true]]) {
      const bytes = writeGguf({ metadata: { "general.architecture": "llama", last }, tensors: [] });
      const whole = parseGguf(bytes, "vocab.gguf");
      for (let length = 1; length <= bytes.length; length++) {
        const header = parseGgufHeader(bytes.subarray(0, length), bytes.length, "vocab.gguf");
        if (header === undefined) assert.ok(length < bytes.length, "a whole file never needs more bytes");
        else assert.deepEqual([...header.metadata.entries()], [...whole.metadata.entries()], `prefix ${length} of ${bytes.length}`);
      }
    }
  });

  it("a file cut inside its long header is MODEL_FORMAT naming the field, from either reader", async () => {
    await withFile(file.subarray(0, 6_000_000), async (path) => {
      for (const read of [readGgufHeader, readGguf]) {
        await assertRejectsWith(() => read(path), "MODEL_FORMAT", [path, "tokenizer.ggml.tokens"]);
      }
    });
  });
});
