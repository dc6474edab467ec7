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

/**
 * Letters of synthetic words: none of h, e, i, n, a, o, r, so no two adjacent
 * letters form a pair of the base merges, which would outrank the word's own.
 */
const WORD_LETTERS = "bcdfgjklmpqstuvwxyz";

/**
 * The base vocabulary grown to `size` tokens with synthetic words that
 * round-trip: " w" and then " w" plus letters, shorter words first, each
 * reached by one merge (the word less its last letter, that letter). Decoded
 * text re-encodes to the same ids: the pre-tokenizer splits it before each
 * space (letters only, since it splits letters from digits), and each word's
 * merges run left to right up to the whole word, as every prefix is a token.
 * Bench models use it to have a real-sized vocabulary without real merges.
 */
export function syntheticVocab(size: number): ByteVocab {
  const base = byteVocab();
  const tokens = [...base.tokens];
  const tokenTypes = [...base.tokenTypes];
  const merges = [...base.merges];
  const add = (left: string, right: string) => {
    tokens.push(left + right);
    tokenTypes.push(1);
    merges.push(`${left} ${right}`);
  };
  const space = byteToUnicode()[0x20]!;
  if (tokens.length < size) add(space, "w");
  // Breadth first: every word of n letters comes before any of n + 1.
  for (let parent = base.tokens.length; tokens.length < size; parent++) {
    for (const letter of WORD_LETTERS) {
      if (tokens.length === size) break;
      add(tokens[parent]!, letter);
    }
  }
  return { ...base, tokens, tokenTypes, merges };
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
