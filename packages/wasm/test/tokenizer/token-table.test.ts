/**
 * The packed vocabulary: strings kept as UTF-8 bytes (PackedStrings, what
 * the GGUF reader returns for string arrays) and the byte-keyed lookup from
 * text to id (TokenTable), against plain arrays and Maps built here.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PackedStrings, GgufValueType, getStringArray, parseGguf, writeGguf } from "@infer/formats";
import { TokenTable } from "../../src/tokenizer/token-table.js";
import { tokenizerFromGgufMetadata } from "../../src/tokenizer/index.js";

const SAMPLES = ["", "a", "ü", "▁the", "\uFEFFbom", "😀x", "ĠĠ", "<|im_end|>", "a", "tab\tnew\nline"];

describe("PackedStrings", () => {
  it("gives back each string, its bytes and its byte length", () => {
    const packed = PackedStrings.fromStrings(SAMPLES);
    assert.equal(packed.length, SAMPLES.length);
    assert.deepEqual(packed.toArray(), SAMPLES);
    assert.deepEqual([...packed], SAMPLES);
    SAMPLES.forEach((text, i) => {
      const bytes = new TextEncoder().encode(text);
      assert.deepEqual(packed.bytesOf(i), bytes);
      assert.equal(packed.byteLengthOf(i), bytes.length);
    });
    assert.deepEqual(packed.indicesOf("a"), [1, 8]);
    assert.deepEqual(packed.indicesOf(""), [0]);
    assert.deepEqual(packed.indicesOf("missing"), []);
  });

  it("refuses indexes outside the list and offsets that do not cover the bytes", () => {
    const packed = PackedStrings.fromStrings(["x"]);
    assert.throws(() => packed.get(1), RangeError);
    assert.throws(() => packed.get(-1), RangeError);
    assert.throws(() => new PackedStrings(new Uint8Array(3), Uint32Array.of(0, 2)), RangeError);
    assert.throws(() => new PackedStrings(new Uint8Array(0), new Uint32Array(0)), RangeError);
  });

  it("round-trips through GGUF byte for byte, invalid UTF-8 and a leading BOM included", () => {
    // 0xff is never valid UTF-8: it decodes as U+FFFD but must be written back as 0xff.
    const raw = PackedStrings.fromStrings(["\uFEFFhead", "ok"]);
    const bytes = Uint8Array.of(...raw.bytes, 0xff, 0x41);
    const starts = Uint32Array.of(...raw.starts, raw.bytes.length + 2);
    const written = new PackedStrings(bytes, starts);
    const file = parseGguf(writeGguf({ metadata: { list: written, plain: ["p", "q"] } }), "strings.gguf");
    const list = getStringArray(file.metadata, "list", true);
    assert.deepEqual(list.bytes, bytes);
    assert.deepEqual(list.toArray(), ["\uFEFFhead", "ok", "\uFFFDA"]);
    assert.equal(file.metadata.get("plain")?.type, GgufValueType.ARRAY);
    assert.deepEqual(getStringArray(file.metadata, "plain", true).toArray(), ["p", "q"]);
  });
});

describe("TokenTable", () => {
  it("finds every token by its text and by its bytes; later ids win a repeated spelling", () => {
    const table = new TokenTable(SAMPLES);
    const expected = new Map(SAMPLES.map((text, id) => [text, id]));
    for (const [text, id] of expected) assert.equal(table.id(text), id, JSON.stringify(text));
    assert.equal(table.id("a"), 8, "the later of two ids spelled a");
    assert.equal(table.id("b"), undefined);
    assert.equal(table.id("▁th"), undefined);
    const line = new TextEncoder().encode("▁the ĠĠ");
    assert.equal(table.idOfBytes(line, 0, 6), 3);
    assert.equal(table.idOfBytes(line, 7, 11), 6);
    assert.equal(table.text(5), "😀x");
  });

  it("agrees with a Map over a large random vocabulary, for tokens and for near misses", () => {
    let seed = 12345;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const alphabet = ["a", "b", "c", "é", "Ġ", "▁", "中", "😀", " "];
    const tokens: string[] = [];
    for (let i = 0; i < 20000; i++) {
      let text = "";
      const length = 1 + (next() % 7);
      for (let k = 0; k < length; k++) text += alphabet[next() % alphabet.length];
      tokens.push(text);
    }
    const table = new TokenTable(PackedStrings.fromStrings(tokens));
    const map = new Map<string, number>();
    tokens.forEach((text, id) => map.set(text, id));
    for (const text of map.keys()) {
      assert.equal(table.id(text), map.get(text));
      assert.equal(table.id(`${text}z`), map.get(`${text}z`));
    }
  });
});

describe("packed merges", () => {
  const tokens = ["a", "b", "c", "ab", "abc", "bc", "Ġ", "Ġa"];
  const merges = ["a b", "ab c", "b c", "Ġ a"];
  const metadata = (mergeList: PackedStrings) =>
    new Map<string, unknown>([
      ["tokenizer.ggml.model", "gpt2"],
      ["tokenizer.ggml.pre", "qwen2"],
      ["tokenizer.ggml.tokens", PackedStrings.fromStrings(tokens)],
      ["tokenizer.ggml.merges", mergeList],
    ]);

  it("split at the first space after the first character (a two-byte one here) and merge by rank", () => {
    const tokenizer = tokenizerFromGgufMetadata(metadata(PackedStrings.fromStrings(merges)), "packed.gguf");
    // Worked by hand: "a b" (rank 0) first, then "ab c" (1), "b c" (2), "Ġ a" (3).
    assert.deepEqual(tokenizer.encode("abc"), [4]);
    assert.deepEqual(tokenizer.encode("abcb"), [4, 1]);
    assert.deepEqual(tokenizer.encode("bca"), [5, 0]);
    assert.deepEqual(tokenizer.encode(" a"), [7]);
    assert.deepEqual(tokenizer.encode(" abc"), [6, 4]);
  });

  it("a line without a space is MODEL_FORMAT naming the field and its index", () => {
    assert.throws(
      () => tokenizerFromGgufMetadata(metadata(PackedStrings.fromStrings(["a b", "abc"])), "bad.gguf"),
      (error: Error & { code?: string }) =>
        error.code === "MODEL_FORMAT" && error.message.includes("bad.gguf") && error.message.includes("tokenizer.ggml.merges[1]"),
    );
  });
});
