/**
 * A tiny GPT-2-style byte-level BPE vocabulary for random test models: the 256
 * byte tokens (in GPT-2's byte-to-unicode spelling), a few merges and two
 * control tokens. Small enough to keep models tiny, complete enough that
 * llama.cpp and Hugging Face tokenizers load it.
 */

/** GPT-2's reversible map from bytes to printable characters. */
export function byteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table = new Array<string>(256);
  let next = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = printable.includes(b) ? String.fromCodePoint(b) : String.fromCodePoint(256 + next++);
  }
  return table;
}

/** Merges in priority order; each joins two existing tokens into a new one. */
const MERGES: readonly [string, string][] = [
  ["Ġ", "t"],
  ["h", "e"],
  ["Ġt", "he"],
  ["i", "n"],
  ["a", "n"],
  ["e", "r"],
  ["o", "n"],
  ["Ġ", "a"],
];

export const BOS_TOKEN = "<|bos|>";
export const EOS_TOKEN = "<|eos|>";

export interface ByteVocab {
  /** Token strings by id. */
  tokens: string[];
  /** GGUF token types by id: 1 normal, 3 control. */
  tokenTypes: number[];
  /** "left right" strings, in priority order. */
  merges: string[];
  bosId: number;
  eosId: number;
}

export function byteVocab(): ByteVocab {
  const tokens = byteToUnicode();
  for (const [left, right] of MERGES) tokens.push(left + right);
  const bosId = tokens.push(BOS_TOKEN) - 1;
  const eosId = tokens.push(EOS_TOKEN) - 1;
  const tokenTypes = tokens.map((_, id) => (id === bosId || id === eosId ? 3 : 1));
  return { tokens, tokenTypes, merges: MERGES.map(([l, r]) => `${l} ${r}`), bosId, eosId };
}

/** The same vocabulary as a Hugging Face tokenizer.json (byte-level BPE). */
export function byteVocabTokenizerJson(vocab: ByteVocab): Record<string, unknown> {
  const special = new Set([vocab.bosId, vocab.eosId]);
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [...special].map((id) => ({
      id,
      content: vocab.tokens[id],
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab: Object.fromEntries(vocab.tokens.map((token, id) => [token, id]).filter(([, id]) => !special.has(id as number))),
      merges: vocab.merges,
    },
  };
}
