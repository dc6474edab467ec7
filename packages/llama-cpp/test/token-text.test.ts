import assert from "node:assert/strict";
import { test } from "node:test";
import { type Detokenizer, TokenTextStream } from "../src/token-text.js";

/**
 * A byte-level vocabulary: token id = one byte. Decoding turns incomplete
 * UTF-8 into U+FFFD, as llama.cpp's detokenizer does.
 */
const bytes: Detokenizer = {
  detokenize(tokens, _special, lastTokens = []) {
    const all = new TextDecoder().decode(Uint8Array.from([...lastTokens, ...tokens]));
    const before = new TextDecoder().decode(Uint8Array.from(lastTokens));
    return all.startsWith(before) ? all.slice(before.length) : new TextDecoder().decode(Uint8Array.from(tokens));
  },
};

test("a character split over tokens arrives whole with the token completing it", () => {
  const text = "a€b😀";
  const ids = [...new TextEncoder().encode(text)];
  const stream = new TokenTextStream(bytes);
  const out = ids.flatMap((id) => stream.push(id)).concat(stream.flush());
  assert.deepEqual(
    out.map((t) => t.id),
    ids,
  );
  assert.equal(out.map((t) => t.text).join(""), text);
  // "€" is 3 bytes: two empty texts, then the whole character.
  assert.deepEqual(
    out.slice(1, 4).map((t) => t.text),
    ["", "", "€"],
  );
  assert.equal(out.at(-1)!.text, "😀");
});

test("flush releases bytes that never complete a character", () => {
  const stream = new TokenTextStream(bytes);
  assert.deepEqual(stream.push(0xe2), []);
  const out = stream.flush();
  assert.equal(out.length, 1);
  assert.equal(out[0]!.text, "\uFFFD");
});

test("a control token (BOS mid-stream) adds no text", () => {
  // A vocabulary where id 1 is BOS: llama.cpp spells it "<s>" only when asked for special-token text.
  const withBos: Detokenizer = {
    detokenize(tokens, special) {
      return tokens.map((id) => (id === 1 ? (special ? "<s>" : "") : String.fromCharCode(id))).join("");
    },
  };
  const stream = new TokenTextStream(withBos);
  const out = [0x61, 1, 0x62].flatMap((id) => stream.push(id)).concat(stream.flush());
  assert.deepEqual(
    out.map((t) => [t.id, t.text]),
    [
      [0x61, "a"],
      [1, ""],
      [0x62, "b"],
    ],
  );
});
