/**
 * GGUF tokenizer metadata on small hand-made vocabularies (expected ids worked
 * out by hand), pre-tokenizer selection, loadTokenizer's inputs, and the
 * errors bad metadata must produce.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { GgmlType, type GgufValueInput } from "@infer/formats";
import { writeGgufFile } from "@infer/formats/node";
import {
  BYTE_TO_CHAR,
  loadTokenizer,
  preTokenizerForGguf,
  splitWords,
  tokenizerFromGgufMetadata,
  tokenizerFromHfJson,
} from "../../src/tokenizer/index.js";

const isCode = (code: string) => (error: Error & { code?: string }) => error.code === code;
const names = (code: string, ...fragments: string[]) => (error: Error & { code?: string }) =>
  error.code === code && fragments.every((f) => error.message.includes(f));

/** A tiny SentencePiece vocabulary: control tokens, 256 byte tokens, then scored pieces. */
function spmMetadata(withByteTokens = true): Record<string, GgufValueInput> {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  const scores = [0, 0, 0];
  for (let b = 0; b < (withByteTokens ? 256 : 0); b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
    scores.push(0);
  }
  // Higher score merges first: "▁a" beats "ab", so "▁abc" -> ▁a + b + c -> ▁a + bc (no "▁abc").
  const pieces: [string, number][] = [["▁", -1], ["a", -2], ["b", -3], ["c", -4], ["▁a", -5], ["ab", -6], ["bc", -7], ["▁ab", -8], ["<user>", 0]];
  for (const [piece, score] of pieces) {
    tokens.push(piece);
    types.push(piece === "<user>" ? 4 : 1);
    scores.push(score);
  }
  return {
    "tokenizer.ggml.model": "llama",
    "tokenizer.ggml.tokens": tokens,
    "tokenizer.ggml.token_type": Int32Array.from(types),
    "tokenizer.ggml.scores": Float32Array.from(scores),
    "tokenizer.ggml.bos_token_id": 1,
    "tokenizer.ggml.eos_token_id": 2,
    "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
  };
}

/** A tiny byte-level BPE vocabulary: the 256 byte characters, then merged pieces. */
function bpeMetadata(pre: string): Record<string, GgufValueInput> {
  const tokens = [...BYTE_TO_CHAR];
  const merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "1 2", "12 3"];
  for (const line of merges) tokens.push(line.replace(" ", ""));
  tokens.push("lo", "<|eot|>");
  const types = tokens.map((t) => (t === "<|eot|>" ? 3 : 1));
  return {
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.pre": pre,
    "tokenizer.ggml.tokens": tokens,
    "tokenizer.ggml.token_type": Int32Array.from(types),
    "tokenizer.ggml.merges": merges,
    "tokenizer.ggml.eos_token_id": tokens.length - 1,
  };
}

describe("GGUF SentencePiece vocabulary", () => {
  const tokenizer = tokenizerFromGgufMetadata(spmMetadata(), "tiny-spm");
  const id = (text: string) => tokenizer.tokenId(text)!;

  it("merges by score, prefixes a space, falls back to bytes", () => {
    assert.deepEqual(tokenizer.encode("abc"), [1, id("▁a"), id("bc")]);
    assert.deepEqual(tokenizer.encode("abc", { addSpecialTokens: false }), [id("▁a"), id("bc")]);
    // "é" is not a piece: its UTF-8 bytes C3 A9 become byte tokens.
    assert.deepEqual(tokenizer.encode("é", { addSpecialTokens: false }), [id("▁"), id("<0xC3>"), id("<0xA9>")]);
    assert.equal(tokenizer.decode(tokenizer.encode("abc é")), "<s> abc é");
    // Without byte tokens an unknown piece is one <unk>.
    const noBytes = tokenizerFromGgufMetadata(spmMetadata(false), "no-bytes");
    assert.deepEqual(noBytes.encode("aé", { addSpecialTokens: false }), [noBytes.tokenId("▁a"), 0]);
    assert.equal(tokenizer.decode(tokenizer.encode("abc é"), { skipSpecialTokens: true }), "abc é");
  });

  it("matches control tokens only when parsing special tokens, user-defined ones always", () => {
    assert.deepEqual(tokenizer.encode("a</s>a", { addSpecialTokens: false }), [id("▁a"), 2, id("▁a")]);
    const literal = tokenizer.encode("</s>", { addSpecialTokens: false, parseSpecial: false });
    assert.ok(!literal.includes(2));
    assert.equal(tokenizer.decode(literal), "</s>");
    assert.deepEqual(tokenizer.encode("<user>", { addSpecialTokens: false, parseSpecial: false }), [id("<user>")]);
  });

  it("reads ids, flags and the chat template", () => {
    assert.equal(tokenizer.vocabSize, 3 + 256 + 9);
    assert.equal(tokenizer.bosId, 1);
    assert.deepEqual(tokenizer.eosIds, [2]);
    assert.equal(tokenizer.addBos, true);
    assert.equal(tokenizer.addEos, false);
    assert.equal(tokenizer.isEndOfGeneration(2), true);
    assert.equal(tokenizer.renderChat([{ role: "user", content: "x" }]), "x");
    const noPrefix = tokenizerFromGgufMetadata({ ...spmMetadata(), "tokenizer.ggml.add_space_prefix": false, "tokenizer.ggml.add_bos_token": false }, "t");
    assert.deepEqual(noPrefix.encode("abc"), [id("ab"), id("c")]);
  });
});

describe("GGUF byte-level BPE vocabulary", () => {
  it("merges by rank within pre-tokenized words", () => {
    const tokenizer = tokenizerFromGgufMetadata(bpeMetadata("qwen2"), "tiny-bpe");
    const id = (text: string) => tokenizer.tokenId(text)!;
    assert.deepEqual(tokenizer.encode("hello world"), [id("hello"), id("Ġworld")]);
    assert.equal(tokenizer.decode(tokenizer.encode("hello world")), "hello world");
    assert.deepEqual(tokenizer.encode("hello<|eot|>"), [id("hello"), id("<|eot|>")]);
    assert.equal(tokenizer.decode([id("hello"), id("<|eot|>")], { skipSpecialTokens: true }), "hello");
    // An unused (padding) slot decodes to nothing.
    const padded = bpeMetadata("qwen2");
    const types = Int32Array.from(padded["tokenizer.ggml.token_type"] as Int32Array);
    types[id("lo")] = 5;
    const withPad = tokenizerFromGgufMetadata({ ...padded, "tokenizer.ggml.token_type": types }, "pad");
    assert.equal(withPad.decode([id("hello"), id("lo")]), "hello");
    assert.equal(tokenizer.bosId, undefined);
    assert.equal(tokenizer.addBos, false);
    assert.deepEqual(tokenizer.eosIds, [id("<|eot|>")]);
  });

  it("splits digits per the pre-tokenizer: qwen2 one by one, llama-bpe in threes", () => {
    const qwen = tokenizerFromGgufMetadata(bpeMetadata("qwen2"), "q");
    const llama = tokenizerFromGgufMetadata(bpeMetadata("llama-bpe"), "l");
    assert.deepEqual(qwen.encode("123").map((i) => qwen.tokenText(i)), ["1", "2", "3"]);
    assert.deepEqual(llama.encode("123", { addSpecialTokens: false }).map((i) => llama.tokenText(i)), ["123"]);
  });

  it("llama-bpe looks whole words up first (ignore_merges); qwen2 only merges", () => {
    // "lo" is a token no merge builds.
    const qwen = tokenizerFromGgufMetadata(bpeMetadata("qwen2"), "q");
    const llama = tokenizerFromGgufMetadata(bpeMetadata("llama-bpe"), "l");
    assert.deepEqual(qwen.encode("lo").map((i) => qwen.tokenText(i)), ["l", "o"]);
    assert.deepEqual(llama.encode("lo", { addSpecialTokens: false }).map((i) => llama.tokenText(i)), ["lo"]);
  });

  it("chooses llama.cpp's regexes by tokenizer.ggml.pre", () => {
    const split = (pre: string, text: string) => splitWords(text, preTokenizerForGguf(pre, "t").patterns);
    assert.deepEqual(split("llama-bpe", "I'm 12345 ok!!\n\n  x"), ["I", "'m", " ", "123", "45", " ok", "!!\n\n", " ", " x"]);
    assert.deepEqual(split("qwen2", "12345"), ["1", "2", "3", "4", "5"]);
    assert.deepEqual(split("gpt-2", "I'm  ok"), ["I", "'m", " ", " ok"]);
    assert.deepEqual(split("smollm", "ab 123"), ["ab", " ", "1", "2", "3"]);
    // Unicode White_Space, not JavaScript's \s: U+FEFF is not a space, U+0085 is.
    assert.deepEqual(split("qwen2", "x\u0085\u0085y"), ["x", "\u0085", "\u0085y"]);
    assert.deepEqual(split("qwen2", "a\uFEFF\uFEFFb"), ["a", "\uFEFF\uFEFF", "b"]);
    assert.equal(preTokenizerForGguf("never-heard-of", "t").family, "default");
  });
});

describe("GGUF metadata errors", () => {
  const broken = (patch: Record<string, unknown>) => () => tokenizerFromGgufMetadata({ ...spmMetadata(), ...patch }, "bad.gguf");

  it("names the file and key", () => {
    assert.throws(() => tokenizerFromGgufMetadata({}, "empty.gguf"), names("MODEL_FORMAT", "empty.gguf", "tokenizer.ggml.model"));
    assert.throws(() => tokenizerFromGgufMetadata(new Map(), "m.gguf"), names("MODEL_FORMAT", "tokenizer.ggml.model"));
    assert.throws(broken({ "tokenizer.ggml.model": "bert" }), names("MODEL_FORMAT", "bad.gguf", "bert"));
    assert.throws(broken({ "tokenizer.ggml.tokens": undefined }), names("MODEL_FORMAT", "tokenizer.ggml.tokens"));
    assert.throws(broken({ "tokenizer.ggml.tokens": [1, 2] }), names("MODEL_FORMAT", "tokenizer.ggml.tokens"));
    assert.throws(broken({ "tokenizer.ggml.scores": new Float32Array(3) }), names("MODEL_FORMAT", "tokenizer.ggml.scores", "one per token"));
    assert.throws(broken({ "tokenizer.ggml.token_type": "x" }), names("MODEL_FORMAT", "tokenizer.ggml.token_type"));
    assert.throws(broken({ "tokenizer.ggml.bos_token_id": 100000 }), names("MODEL_FORMAT", "tokenizer.ggml.bos_token_id", "outside"));
    assert.throws(broken({ "tokenizer.ggml.bos_token_id": -1 }), names("MODEL_FORMAT", "tokenizer.ggml.bos_token_id"));
    assert.throws(broken({ "tokenizer.ggml.add_bos_token": "yes" }), names("MODEL_FORMAT", "tokenizer.ggml.add_bos_token"));
    assert.throws(
      () => tokenizerFromGgufMetadata({ ...bpeMetadata("qwen2"), "tokenizer.ggml.merges": undefined }, "b.gguf"),
      names("MODEL_FORMAT", "tokenizer.ggml.merges"),
    );
    assert.throws(
      () => tokenizerFromGgufMetadata({ ...bpeMetadata("qwen2"), "tokenizer.ggml.merges": ["nospace"] }, "b.gguf"),
      names("MODEL_FORMAT", "tokenizer.ggml.merges[0]"),
    );
  });

  it("rejects ids outside the vocabulary as INVALID_OPTION", () => {
    const tokenizer = tokenizerFromGgufMetadata(spmMetadata(), "t");
    assert.throws(() => tokenizer.decode([tokenizer.vocabSize]), isCode("INVALID_OPTION"));
    assert.throws(() => tokenizer.tokenText(-1), isCode("INVALID_OPTION"));
    assert.throws(() => tokenizer.streamDecoder().push(1.5), isCode("INVALID_OPTION"));
  });
});

describe("tokenizer.json errors", () => {
  it("names the field", () => {
    assert.throws(() => tokenizerFromHfJson({ tokenizer: [] }, "t.json"), names("MODEL_FORMAT", "t.json", "tokenizer.json"));
    assert.throws(() => tokenizerFromHfJson({ tokenizer: {} }, "t.json"), names("MODEL_FORMAT", "model"));
    assert.throws(
      () => tokenizerFromHfJson({ tokenizer: { model: { type: "Unigram", vocab: [] } } }, "t.json"),
      names("MODEL_FORMAT", "model.type", "Unigram"),
    );
    assert.throws(
      () => tokenizerFromHfJson({ tokenizer: { model: { type: "BPE", vocab: { a: 0 }, merges: [] } } }, "t.json"),
      names("MODEL_FORMAT", "neither byte-level nor SentencePiece-style"),
    );
    assert.throws(
      () => tokenizerFromHfJson({ tokenizer: { model: { type: "BPE", vocab: { a: "x" }, merges: [] } } }, "t.json"),
      names("MODEL_FORMAT", 'model.vocab["a"]'),
    );
  });
});

describe("loadTokenizer", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-tokenizer-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("loads a vocabulary-only GGUF and a GGUF model file", async () => {
    const vocabOnly = join(dir, "vocab.gguf");
    await writeGgufFile(vocabOnly, { metadata: spmMetadata() });
    const fromVocab = await loadTokenizer(vocabOnly);
    assert.equal(fromVocab.source, vocabOnly);
    assert.equal(fromVocab.decode(fromVocab.encode("abc"), { skipSpecialTokens: true }), "abc");

    const model = join(dir, "model.gguf");
    await writeGgufFile(model, {
      metadata: { "general.architecture": "llama", ...bpeMetadata("qwen2") },
      tensors: [{ name: "token_embd.weight", shape: [4, 2], type: GgmlType.F32, data: new Float32Array(8) }],
    });
    assert.equal((await loadTokenizer(model)).decode([256 + 3]), "hello");
    // A folder holding a single GGUF.
    const folder = join(dir, "gguf-folder");
    await mkdir(folder);
    await writeGgufFile(join(folder, "m.gguf"), { metadata: spmMetadata() });
    assert.equal((await loadTokenizer(folder)).vocabSize, 268);
  });

  it("reports what is missing", async () => {
    await assert.rejects(loadTokenizer(join(dir, "nope")), names("MODEL_NOT_FOUND", "nope"));
    const empty = join(dir, "empty");
    await mkdir(empty);
    await assert.rejects(loadTokenizer(empty), names("MODEL_FORMAT", "tokenizer.json"));
    const weightsOnly = join(dir, "weights.gguf");
    await writeGgufFile(weightsOnly, { metadata: { "general.architecture": "llama" } });
    await assert.rejects(loadTokenizer(weightsOnly), names("MODEL_FORMAT", "weights.gguf", "tokenizer.ggml.model"));
    const notGguf = join(dir, "x.bin");
    await writeFile(notGguf, "hello");
    await assert.rejects(loadTokenizer(notGguf), isCode("MODEL_FORMAT"));
    const badJson = join(dir, "bad-json");
    await mkdir(badJson);
    await writeFile(join(badJson, "tokenizer.json"), "{ not json");
    await assert.rejects(loadTokenizer(badJson), names("MODEL_FORMAT", "tokenizer.json", "not valid JSON"));
  });
});
