/**
 * Streaming detokenization: the text pushed token by token, plus flush(),
 * must equal decode(ids) exactly, and a character spelled over several byte
 * tokens must arrive whole with the token that completes it.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { BYTE_TO_CHAR, loadHfTokenizer, TokenKind, type Tokenizer, type VocabTokenizer } from "../../src/tokenizer/index.js";
import { referenceFiles } from "./helpers.js";
import { seededRandom } from "@infer/core/testing";

function pushAll(tokenizer: Tokenizer, ids: readonly number[], skipSpecialTokens = false): { pieces: string[]; tail: string } {
  const stream = tokenizer.streamDecoder({ skipSpecialTokens });
  const pieces = ids.map((id) => stream.push(id));
  return { pieces, tail: stream.flush() };
}

/** Ids whose bytes are a single byte: SentencePiece <0xNN> tokens or byte-level one-character tokens. */
function singleByteIds(tokenizer: Tokenizer): number[] {
  const ids: number[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    if (tokenizer.tokenKind(id) === TokenKind.Byte || (tokenizer.tokenKind(id) === TokenKind.Normal && tokenizer.tokenBytes(id).length === 1)) ids.push(id);
  }
  return ids;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const SAMPLES = [
  "你好，世界！日本語のテキスト。한국어",
  "😀👍🏽🇫🇷 family: 👨‍👩‍👧‍👦 and 🏳️‍🌈",
  "  two leading spaces, then e\u0301 and \u{1D11E} and \u{10348}",
  "\u{FEFF}byte order mark first",
];

for (const name of ["llama2", "qwen3"] as const) {
  describe(`StreamDecoder on the ${name} vocabulary`, () => {
    let tokenizer: VocabTokenizer;
    before(async () => {
      tokenizer = await loadHfTokenizer(referenceFiles(name).folder);
    });

    it("concatenates to decode(ids) on random id sequences (heavy on single-byte tokens)", () => {
      const random = seededRandom(name === "llama2" ? 1 : 2);
      const bytes = singleByteIds(tokenizer);
      assert.ok(bytes.length >= 256, `expected at least 256 single-byte tokens, found ${bytes.length}`);
      for (let round = 0; round < 300; round++) {
        const length = 1 + Math.floor(random() * 40);
        const ids = Array.from({ length }, () =>
          random() < 0.6 ? bytes[Math.floor(random() * bytes.length)]! : Math.floor(random() * tokenizer.vocabSize),
        );
        for (const skip of [false, true]) {
          const { pieces, tail } = pushAll(tokenizer, ids, skip);
          assert.equal(pieces.join("") + tail, tokenizer.decode(ids, { skipSpecialTokens: skip }), `ids ${JSON.stringify(ids)}`);
        }
      }
    });

    it("emits each CJK / emoji character whole, once, with the token that completes it", () => {
      for (const text of SAMPLES) {
        const ids = tokenizer.encode(text, { addSpecialTokens: false });
        const { pieces, tail } = pushAll(tokenizer, ids);
        const decoded = tokenizer.decode(ids);
        assert.equal(decoded, name === "qwen3" ? text.normalize("NFC") : text);
        assert.equal(pieces.join("") + tail, decoded);
        assert.equal(tail, "");
        for (const [i, piece] of pieces.entries()) {
          assert.ok(!piece.includes("\uFFFD"), `piece ${i} of ${JSON.stringify(text)} has a replacement character`);
          assert.ok(!LONE_SURROGATE.test(piece), `piece ${i} of ${JSON.stringify(text)} splits a surrogate pair`);
        }
        // After each token, exactly the whole characters its bytes completed
        // have been emitted: the byte stream cut back to a character start.
        const all = concatBytes(ids.map((id) => tokenizer.tokenBytes(id)));
        let consumed = 0;
        ids.forEach((id, i) => {
          consumed += tokenizer.tokenBytes(id).length;
          let whole = consumed;
          while (whole < all.length && (all[whole]! & 0xc0) === 0x80) whole--;
          let expected = new TextDecoder("utf-8", { ignoreBOM: true }).decode(all.subarray(0, whole));
          if (name === "llama2") expected = expected.replace(/^ /, "");
          assert.equal(pieces.slice(0, i + 1).join(""), expected, `after token ${i} of ${JSON.stringify(text)}`);
        });
      }
    });

    it("holds back a partial character until it completes, and flush renders a dangling one as U+FFFD", () => {
      const ids = tokenizer.encode("😀", { addSpecialTokens: false });
      const { pieces, tail } = pushAll(tokenizer, ids);
      assert.equal(pieces.join(""), "😀");
      assert.equal(tail, "");
      const completing = pieces.findIndex((p) => p.includes("😀"));
      assert.ok(pieces.slice(0, completing).every((p) => p === "" || p === " "));
      // Only the first three of the emoji's four bytes, as single-byte tokens: nothing until flush.
      const byteToken = (byte: number) =>
        name === "llama2" ? `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>` : BYTE_TO_CHAR[byte]!;
      const partial = [0xf0, 0x9f, 0x98].map((byte) => tokenizer.tokenId(byteToken(byte))!);
      assert.ok(partial.every((id) => id !== undefined));
      const cut = pushAll(tokenizer, partial);
      assert.deepEqual(cut.pieces, ["", "", ""]);
      assert.equal(cut.tail, "\uFFFD");
      assert.equal(tokenizer.decode(partial), "\uFFFD");
      // The fourth byte completes it; the stream is reusable after flush.
      const stream = tokenizer.streamDecoder();
      assert.deepEqual(
        [...partial, tokenizer.tokenId(byteToken(0x80))!].map((id) => stream.push(id)),
        ["", "", "", "😀"],
      );
      assert.equal(stream.flush(), "");
    });

    it("keeps word-boundary spaces and drops only the leading space decode drops", () => {
      const ids = tokenizer.encode("Hello big world");
      const shown = pushAll(tokenizer, ids);
      assert.equal(shown.pieces.join("") + shown.tail, tokenizer.decode(ids));
      const hidden = pushAll(tokenizer, ids, true);
      assert.equal(hidden.pieces.join("") + hidden.tail, "Hello big world");
      if (name === "llama2") {
        // BOS renders as "<s>" and the first word keeps its space after it, as in decode.
        assert.deepEqual(shown.pieces, ["<s>", " Hello", " big", " world"]);
        assert.deepEqual(hidden.pieces, ["", "Hello", " big", " world"]);
      }
    });
  });
}
