// safetensors: the shared TinyStories-656K weights, writer round trips,
// sharded folders, and one broken file per validation rule.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import {
  bf16ToF32,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  parseSafetensors,
  toFloat32,
  writeSafetensors,
} from "../src/index.js";
import { readSafetensors, readSafetensorsModel, writeSafetensorsFile } from "../src/node/index.js";
import { SHARED_MODELS, assertInferenceError, assertRejectsWith, sharedModelsSkip } from "./helpers.js";

const TINY = join(SHARED_MODELS, "tinystories-656k");

describe("tinystories-656k/model.safetensors (shared model)", { skip: sharedModelsSkip() }, () => {
  it("reads every tensor with shapes that match config.json, and the tied-embedding alias", async () => {
    const config = JSON.parse(await readFile(join(TINY, "config.json"), "utf8")) as Record<string, number>;
    const model = await readSafetensorsModel(TINY);
    assert.deepEqual(model.files, [join(TINY, "model.safetensors")]);
    assert.equal(model.metadata["model.embed_tokens.weight"], "lm_head.weight");
    const hidden = config["hidden_size"]!;
    const headDim = hidden / config["num_attention_heads"]!;
    const kvDim = headDim * config["num_key_value_heads"]!;
    const lmHead = model.tensors.get("lm_head.weight")!;
    assert.equal(lmHead.dtype, "F32");
    assert.deepEqual(lmHead.shape, [config["vocab_size"], hidden]);
    assert.equal(model.tensors.has("model.embed_tokens.weight"), false);
    assert.equal(model.tensors.size, 2 + 9 * config["num_hidden_layers"]!);
    assert.deepEqual(model.tensors.get("model.layers.1.self_attn.k_proj.weight")!.shape, [kvDim, hidden]);
    assert.deepEqual(model.tensors.get("model.layers.0.mlp.down_proj.weight")!.shape, [hidden, config["intermediate_size"]]);
    assert.equal(lmHead.file, join(TINY, "model.safetensors"));
  });

  it("toFloat32 gives the floats stored at the header's offsets", async () => {
    const raw = await readFile(join(TINY, "model.safetensors"));
    const headerLength = Number(raw.readBigUInt64LE(0));
    const header = JSON.parse(raw.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, { data_offsets: number[] }>;
    const [begin, end] = header["model.norm.weight"]!.data_offsets as [number, number];
    const expected: number[] = [];
    for (let at = 8 + headerLength + begin; at < 8 + headerLength + end; at += 4) expected.push(raw.readFloatLE(at));
    const file = await readSafetensors(join(TINY, "model.safetensors"));
    assert.deepEqual(Array.from(toFloat32(file.tensors.get("model.norm.weight")!)), expected);
  });
});

describe("safetensors writer round trip", () => {
  const values = Float32Array.from({ length: 24 }, (_, i) => (i - 11.3) * 0.173);

  it("keeps names, dtypes, shapes, metadata and values (F16/BF16 rounded to nearest even)", () => {
    const bytes = writeSafetensors(
      [
        { name: "a.f32", dtype: "F32", shape: [4, 6], data: values },
        { name: "b.f16", dtype: "F16", shape: [2, 3, 4], data: values },
        { name: "c.bf16", dtype: "BF16", shape: [24], data: values },
        { name: "d.empty", dtype: "F32", shape: [0, 5], data: new Float32Array(0) },
      ],
      { format: "pt", note: "hello" },
    );
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    assert.equal(headerLength % 8, 0, "data starts 8-byte aligned");
    const headerText = new TextDecoder().decode(bytes.subarray(8, 8 + headerLength));
    assert.match(headerText, /^\{.*\} *$/);
    const file = parseSafetensors(bytes, "written.safetensors");
    assert.deepEqual(file.metadata, { format: "pt", note: "hello" });
    assert.deepEqual([...file.tensors.keys()], ["a.f32", "b.f16", "c.bf16", "d.empty"]);
    assert.deepEqual(file.tensors.get("b.f16")!.shape, [2, 3, 4]);
    assert.equal(file.tensors.get("c.bf16")!.dtype, "BF16");
    assert.deepEqual(toFloat32(file.tensors.get("a.f32")!), values);
    assert.deepEqual(toFloat32(file.tensors.get("b.f16")!), Float32Array.from(values, (v) => f16ToF32(f32ToF16(v))));
    assert.deepEqual(toFloat32(file.tensors.get("c.bf16")!), Float32Array.from(values, (v) => bf16ToF32(f32ToBf16(v))));
    assert.equal(toFloat32(file.tensors.get("d.empty")!).length, 0);
  });

  it("rejects tensors it cannot write", () => {
    assertInferenceError(
      () => writeSafetensors([{ name: "w", dtype: "F32", shape: [2, 2], data: new Float32Array(3) }]),
      "INVALID_OPTION",
      ['tensor "w"', "4"],
    );
    assertInferenceError(
      () => writeSafetensors([{ name: "w", dtype: "F64" as "F32", shape: [1], data: new Float32Array(1) }]),
      "UNSUPPORTED_DTYPE",
      ['tensor "w"', "F64"],
    );
  });
});

describe("safetensors model folders", () => {
  const folders: string[] = [];
  after(async () => {
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  });
  async function folderWith(files: Record<string, Uint8Array | string>): Promise<string> {
    const folder = await mkdtemp(join(tmpdir(), "infer-safetensors-"));
    folders.push(folder);
    for (const [name, content] of Object.entries(files)) await writeFile(join(folder, name), content);
    return folder;
  }
  const shard1 = writeSafetensors([{ name: "x", dtype: "F32", shape: [2], data: Float32Array.from([1, 2]) }], { format: "pt" });
  const shard2 = writeSafetensors([{ name: "y", dtype: "F16", shape: [1], data: Float32Array.from([3]) }]);
  const index = (weightMap: Record<string, string>) =>
    JSON.stringify({ metadata: { total_size: 10 }, weight_map: weightMap });

  it("reads the shards an index names", async () => {
    const folder = await folderWith({
      "model-00001-of-00002.safetensors": shard1,
      "model-00002-of-00002.safetensors": shard2,
      "model.safetensors.index.json": index({ x: "model-00001-of-00002.safetensors", y: "model-00002-of-00002.safetensors" }),
    });
    const model = await readSafetensorsModel(folder);
    assert.deepEqual([...model.tensors.keys()].sort(), ["x", "y"]);
    assert.deepEqual(toFloat32(model.tensors.get("y")!), Float32Array.from([3]));
    assert.equal(model.tensors.get("y")!.file, join(folder, "model-00002-of-00002.safetensors"));
    assert.deepEqual(model.metadata, { total_size: "10", format: "pt" });
  });

  it("a shard named in the index but absent is MODEL_FORMAT naming the shard", async () => {
    const folder = await folderWith({
      "model-00001-of-00002.safetensors": shard1,
      "model.safetensors.index.json": index({ x: "model-00001-of-00002.safetensors", y: "model-00002-of-00002.safetensors" }),
    });
    await assertRejectsWith(() => readSafetensorsModel(folder), "MODEL_FORMAT", ["model-00002-of-00002.safetensors", "model.safetensors.index.json"]);
  });

  it("an index entry whose tensor is not in its shard, or a shard path leaving the folder", async () => {
    const wrongShard = await folderWith({
      "a.safetensors": shard1,
      "b.safetensors": shard2,
      "model.safetensors.index.json": index({ x: "b.safetensors", y: "b.safetensors", z: "a.safetensors" }),
    });
    await assertRejectsWith(() => readSafetensorsModel(wrongShard), "MODEL_FORMAT", ['weight_map["x"]', "b.safetensors"]);
    const escaping = await folderWith({ "model.safetensors.index.json": index({ x: "../a.safetensors" }) });
    await assertRejectsWith(() => readSafetensorsModel(escaping), "MODEL_FORMAT", ['weight_map["x"]']);
  });

  it("a folder with no weights is MODEL_NOT_FOUND; a file path works with writeSafetensorsFile", async () => {
    const empty = await folderWith({});
    await assertRejectsWith(() => readSafetensorsModel(empty), "MODEL_NOT_FOUND", [empty]);
    const single = await folderWith({});
    await writeSafetensorsFile(join(single, "model.safetensors"), [{ name: "w", dtype: "BF16", shape: [1], data: Float32Array.from([0.5]) }]);
    const model = await readSafetensorsModel(single);
    assert.deepEqual(toFloat32(model.tensors.get("w")!), Float32Array.from([0.5]));
  });
});

/** A safetensors file from a header given as text (or object) and `dataBytes` of data. */
function rawFile(header: string | object, dataBytes: number, declaredLength?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, declaredLength ?? BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

function parseBad(bytes: Uint8Array): () => unknown {
  return () => parseSafetensors(bytes, "bad.safetensors");
}

describe("safetensors validation", () => {
  it("header length beyond the file, absurd, or missing", () => {
    assertInferenceError(parseBad(rawFile("{}", 0, 1000n)), "MODEL_FORMAT", ["bad.safetensors", "header length", "1000"]);
    assertInferenceError(parseBad(rawFile("{}", 0, 2n ** 40n)), "MODEL_FORMAT", ["bad.safetensors", "header length", "limit"]);
    assertInferenceError(parseBad(new Uint8Array(5)), "MODEL_FORMAT", ["bad.safetensors", "header length"]);
  });

  it("a header that is not JSON or not an object", () => {
    assertInferenceError(parseBad(rawFile("{oops", 0)), "MODEL_FORMAT", ["bad.safetensors", "header", "JSON"]);
    assertInferenceError(parseBad(rawFile("[1, 2]", 0)), "MODEL_FORMAT", ["bad.safetensors", "header", "not a JSON object"]);
    assertInferenceError(parseBad(rawFile({ w: 3 }, 0)), "MODEL_FORMAT", ["bad.safetensors", '"w"']);
    assertInferenceError(parseBad(rawFile({ __metadata__: { n: 1 } }, 0)), "MODEL_FORMAT", ["bad.safetensors", '__metadata__["n"]']);
  });

  it("data_offsets out of range or overlapping", () => {
    const outside = rawFile({ w: { dtype: "F32", shape: [100], data_offsets: [0, 400] } }, 16);
    assertInferenceError(parseBad(outside), "MODEL_FORMAT", ["bad.safetensors", '"w" data_offsets', "16 bytes"]);
    const backwards = rawFile({ w: { dtype: "U8", shape: [0], data_offsets: [8, 4] } }, 16);
    assertInferenceError(parseBad(backwards), "MODEL_FORMAT", ["bad.safetensors", '"w" data_offsets']);
    const overlapping = rawFile(
      {
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
      },
      16,
    );
    assertInferenceError(parseBad(overlapping), "MODEL_FORMAT", ["bad.safetensors", '"b" data_offsets', "overlaps", '"a"']);
  });

  it("a header nested past the JSON depth bound, or not UTF-8, names the file and the header", () => {
    const deep = `{"__metadata__":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    assertInferenceError(parseBad(rawFile(deep, 0)), "MODEL_FORMAT", ["bad.safetensors: safetensors header", "deeper than"]);
    const notUtf8 = rawFile("{}", 0);
    notUtf8[8] = 0xff;
    assertInferenceError(parseBad(notUtf8), "MODEL_FORMAT", ["bad.safetensors: safetensors header", "UTF-8"]);
  });

  it("element count times dtype size not matching the byte range", () => {
    const bytes = rawFile({ w: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }, 16);
    assertInferenceError(parseBad(bytes), "MODEL_FORMAT", ["bad.safetensors", '"w" data_offsets', "F32 [3]", "12 bytes"]);
  });

  it("unknown dtypes are UNSUPPORTED_DTYPE naming the tensor", () => {
    const bytes = rawFile({ w: { dtype: "F7", shape: [1], data_offsets: [0, 1] } }, 8);
    assertInferenceError(parseBad(bytes), "UNSUPPORTED_DTYPE", ["bad.safetensors", '"w"', "F7"]);
    const inherited = rawFile({ w: { dtype: "constructor", shape: [1], data_offsets: [0, 1] } }, 8);
    assertInferenceError(parseBad(inherited), "UNSUPPORTED_DTYPE", ['"w"', "constructor"]);
  });

  it("toFloat32 refuses dtypes other than F32, F16 and BF16, naming the tensor", () => {
    const file = parseSafetensors(rawFile({ ids: { dtype: "I32", shape: [2], data_offsets: [0, 8] } }, 8), "ints.safetensors");
    assertInferenceError(() => toFloat32(file.tensors.get("ids")!), "UNSUPPORTED_DTYPE", ["ints.safetensors", '"ids"', "I32"]);
  });
});
