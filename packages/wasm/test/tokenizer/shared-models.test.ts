/**
 * The tokenizers of the real small models in ../shared/models: stories260K's
 * GGUF SentencePiece vocabulary (checked against a naive encoder written the
 * way llama2.c's run.c encodes, over llama2.c's own tok512.bin) and
 * TinyStories-656K's tokenizer.json (checked against its recorded prompt ids
 * and greedy text).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { loadTokenizer, type Tokenizer } from "../../src/tokenizer/index.js";
import { SHARED_MODELS, SHARED_MODELS_MISSING } from "./helpers.js";

interface Llama2cVocab {
  pieces: string[];
  scores: number[];
}

/** llama2.c's tokenizer file: i32 max_token_length, then per token f32 score, i32 length, bytes. */
function readLlama2cVocab(path: string): Llama2cVocab {
  const bytes = readFileSync(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const pieces: string[] = [];
  const scores: number[] = [];
  for (let at = 4; at < bytes.length; ) {
    scores.push(view.getFloat32(at, true));
    const length = view.getInt32(at + 4, true);
    pieces.push(decoder.decode(bytes.subarray(at + 8, at + 8 + length)));
    at += 8 + length;
  }
  return { pieces, scores };
}

/**
 * Encoding as llama2.c's run.c does it, deliberately naive: BOS, a dummy
 * space prefix, one token per code point (bytes + 3 when missing), then
 * repeatedly merge the adjacent pair whose joined piece scores best
 * (leftmost on ties) until none is in the vocabulary.
 */
function llama2cEncode(vocab: Llama2cVocab, text: string): number[] {
  const idOf = new Map(vocab.pieces.map((piece, id) => [piece, id]));
  const ids = [1];
  if (text.length > 0) ids.push(idOf.get(" ")!);
  for (const ch of text) {
    const id = idOf.get(ch);
    if (id !== undefined) ids.push(id);
    else for (const byte of new TextEncoder().encode(ch)) ids.push(byte + 3);
  }
  for (;;) {
    let best = -Infinity;
    let bestAt = -1;
    let bestId = -1;
    for (let i = 1; i + 1 < ids.length; i++) {
      const id = idOf.get(vocab.pieces[ids[i]!]! + vocab.pieces[ids[i + 1]!]!);
      if (id !== undefined && vocab.scores[id]! > best) {
        best = vocab.scores[id]!;
        bestAt = i;
        bestId = id;
      }
    }
    if (bestAt < 0) return ids;
    ids.splice(bestAt, 2, bestId);
  }
}

function streamAll(tokenizer: Tokenizer, ids: readonly number[], skipSpecialTokens: boolean): string {
  const stream = tokenizer.streamDecoder({ skipSpecialTokens });
  return ids.map((id) => stream.push(id)).join("") + stream.flush();
}

describe("stories260K.gguf tokenizer", { skip: SHARED_MODELS_MISSING }, () => {
  const folder = join(SHARED_MODELS, "stories260K");
  let tokenizer: Tokenizer;
  let vocab: Llama2cVocab;
  // The oracle text ends with one newline llama2.c printed after the 200 tokens.
  const story = () => readFileSync(join(folder, "expected-greedy-200.txt"), "utf8").replace(/\n$/, "");

  before(async () => {
    tokenizer = await loadTokenizer(join(folder, "stories260K.gguf"));
    vocab = readLlama2cVocab(join(folder, "tok512.bin"));
  });

  it("has the 512-token vocabulary with <s> / </s>", () => {
    assert.equal(tokenizer.vocabSize, 512);
    assert.equal(vocab.pieces.length, 512);
    assert.equal(tokenizer.bosId, 1);
    assert.deepEqual(tokenizer.eosIds, [2]);
    assert.equal(tokenizer.addBos, true);
    assert.equal(tokenizer.isSpecial(1), true);
    assert.equal(tokenizer.isSpecial(403), false);
  });

  it("decodes ids to llama2.c's pieces", () => {
    const ids = [403, 407, 261, 378, 13];
    const expected = ids.map((id) => vocab.pieces[id]).join("").replace(/^ /, "").replace("<0x0A>", "\n");
    assert.equal(tokenizer.decode(ids), expected);
    assert.equal(tokenizer.decode([1, ...ids], { skipSpecialTokens: true }), expected);
    assert.equal(tokenizer.decode([403, 407, 261, 378]), "Once upon a time");
  });

  it('encodes "Once upon a time" as llama2.c does, and round-trips', () => {
    const ids = tokenizer.encode("Once upon a time");
    assert.deepEqual(ids, llama2cEncode(vocab, "Once upon a time"));
    assert.equal(ids[0], 1);
    assert.equal(tokenizer.decode(ids, { skipSpecialTokens: true }), "Once upon a time");
  });

  it("re-encodes the 200-token oracle story as llama2.c does and decodes it back", () => {
    const text = story();
    const ids = tokenizer.encode(text);
    assert.deepEqual(ids, llama2cEncode(vocab, text));
    const withoutBos = tokenizer.encode(text, { addSpecialTokens: false });
    assert.deepEqual(withoutBos, ids.slice(1));
    assert.equal(tokenizer.decode(withoutBos), text);
    assert.equal(streamAll(tokenizer, ids, true), text);
  });
});

describe("TinyStories-656K tokenizer.json", { skip: SHARED_MODELS_MISSING }, () => {
  const folder = join(SHARED_MODELS, "tinystories-656k");
  let tokenizer: Tokenizer;
  let expected: { prompt: string; prompt_ids: number[]; greedy_ids: number[]; greedy_text: string };

  before(async () => {
    tokenizer = await loadTokenizer(folder);
    expected = JSON.parse(readFileSync(join(folder, "expected-greedy-100.json"), "utf8")) as typeof expected;
  });

  it("encodes the prompt with BOS to the recorded prompt ids", () => {
    assert.deepEqual(tokenizer.encode(expected.prompt), expected.prompt_ids);
    assert.equal(tokenizer.bosId, 1);
    assert.deepEqual(tokenizer.eosIds, [2]);
  });

  it("decodes (and streams) prompt + greedy ids to the recorded text", () => {
    const ids = [...expected.prompt_ids, ...expected.greedy_ids];
    assert.equal(tokenizer.decode(ids, { skipSpecialTokens: true }), expected.greedy_text);
    assert.equal(streamAll(tokenizer, ids, true), expected.greedy_text);
  });

  it("has no chat template", () => {
    assert.equal(tokenizer.chatTemplate, undefined);
    assert.throws(() => tokenizer.renderChat([{ role: "user", content: "hi" }]), { code: "NO_CHAT_TEMPLATE" });
  });
});
