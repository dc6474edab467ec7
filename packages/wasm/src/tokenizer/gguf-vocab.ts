/**
 * Builds a tokenizer from GGUF `tokenizer.*` metadata, reading the keys the
 * way llama.cpp's llama-vocab does: `tokenizer.ggml.model` "llama" is a
 * SentencePiece vocabulary (scores, token types, byte tokens), "gpt2" a
 * byte-level BPE one (merges, and the pre-tokenizer named by
 * `tokenizer.ggml.pre`).
 */
import { InferenceError } from "@infer/core";
import { PackedStrings } from "@infer/formats";
import { preTokenizerForGguf } from "./pretokenize.js";
import { TokenKind } from "./types.js";
import { VocabTokenizer, type VocabularySpec } from "./vocab-tokenizer.js";

export type MetadataSource = ReadonlyMap<string, unknown> | Readonly<Record<string, unknown>>;

/**
 * Texts llama.cpp treats as end-of-generation whatever the metadata says
 * (its list in llama-vocab, since converters do not always record eot ids).
 */
const END_OF_GENERATION_TEXTS = new Set([
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "<|end_of_text|>",
  "<end_of_utterance>",
]);

/** Reads metadata that may be a Map or a plain object, with values possibly wrapped as `{ type, value }`. */
class MetadataReader {
  constructor(
    private readonly meta: MetadataSource,
    readonly source: string,
  ) {}

  raw(key: string): unknown {
    const value = this.meta instanceof Map ? this.meta.get(key) : (this.meta as Record<string, unknown>)[key];
    if (value !== null && typeof value === "object" && !Array.isArray(value) && !ArrayBuffer.isView(value) && "value" in value) {
      return (value as { value: unknown }).value;
    }
    return value;
  }

  has(key: string): boolean {
    return this.raw(key) !== undefined;
  }

  private fail(key: string, expected: string): never {
    throw new InferenceError("MODEL_FORMAT", `${this.source}: metadata ${key} must be ${expected}`, {
      details: { source: this.source, field: key },
    });
  }

  string(key: string): string | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    if (typeof value !== "string") this.fail(key, "a string");
    return value;
  }

  bool(key: string): boolean | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    if (typeof value !== "boolean") this.fail(key, "a boolean");
    return value;
  }

  /** A non-negative integer id, or undefined when absent. */
  uint(key: string): number | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    const n = typeof value === "bigint" ? Number(value) : value;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) this.fail(key, "a non-negative integer");
    return n;
  }

  /** Strings as read from GGUF (packed), or a plain array of them packed here. */
  stringArray(key: string): PackedStrings | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    if (value instanceof PackedStrings) return value;
    if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) this.fail(key, "an array of strings");
    return PackedStrings.fromStrings(value as string[]);
  }

  numberArray(key: string, length: number): ArrayLike<number> | undefined {
    const value = this.raw(key);
    if (value === undefined) return undefined;
    const ok =
      (Array.isArray(value) && value.every((v) => typeof v === "number")) ||
      (ArrayBuffer.isView(value) && !(value instanceof DataView) && !(value instanceof BigInt64Array) && !(value instanceof BigUint64Array));
    if (!ok) this.fail(key, "an array of numbers");
    const array = value as ArrayLike<number>;
    if (array.length !== length) this.fail(key, `an array of ${length} numbers (one per token), not ${array.length}`);
    return array;
  }
}

function kindOf(code: number | undefined): TokenKind {
  return code !== undefined && Number.isInteger(code) && code >= 0 && code <= 6 ? (code as TokenKind) : TokenKind.Normal;
}

/**
 * The tokenizer described by GGUF metadata. `source` names the file in
 * messages. Missing or malformed keys raise InferenceError MODEL_FORMAT
 * naming the key.
 */
export function tokenizerFromGgufMetadata(meta: MetadataSource, source: string): VocabTokenizer {
  const md = new MetadataReader(meta, source);
  const model = md.string("tokenizer.ggml.model");
  if (model === undefined) {
    throw new InferenceError("MODEL_FORMAT", `${source}: no tokenizer (metadata tokenizer.ggml.model is missing)`, {
      details: { source, field: "tokenizer.ggml.model" },
    });
  }
  if (model !== "llama" && model !== "gpt2") {
    throw new InferenceError("MODEL_FORMAT", `${source}: tokenizer.ggml.model "${model}" is not supported (llama and gpt2 are)`, {
      details: { source, field: "tokenizer.ggml.model", value: model },
    });
  }
  const tokens = md.stringArray("tokenizer.ggml.tokens");
  if (!tokens || tokens.length === 0) {
    throw new InferenceError("MODEL_FORMAT", `${source}: metadata tokenizer.ggml.tokens is missing or empty`, {
      details: { source, field: "tokenizer.ggml.tokens" },
    });
  }
  const n = tokens.length;
  const types = md.numberArray("tokenizer.ggml.token_type", n);
  const kinds = new Uint8Array(n);
  for (let id = 0; id < n; id++) kinds[id] = kindOf(types?.[id]);

  const sentencePiece = model === "llama";
  // llama.cpp's SentencePiece defaults when the ids are not recorded. (Its
  // byte-level default of 11 for both bos and eos is an artefact of one old
  // model; token 11 is "," in Qwen's vocabulary, so none is assumed here.)
  const defaults = sentencePiece ? { bos: 1, eos: 2, unk: 0 } : { bos: undefined, eos: undefined, unk: undefined };
  const idKey = (key: string, fallback: number | undefined): number | undefined => {
    const id = md.uint(key) ?? fallback;
    if (id === undefined) return undefined;
    if (id >= n) {
      if (md.has(key)) {
        throw new InferenceError("MODEL_FORMAT", `${source}: metadata ${key} = ${id} is outside the vocabulary (${n} tokens)`, {
          details: { source, field: key, value: id },
        });
      }
      return undefined;
    }
    return id;
  };
  const bosId = idKey("tokenizer.ggml.bos_token_id", defaults.bos);
  const eosId = idKey("tokenizer.ggml.eos_token_id", defaults.eos);
  const eotId = idKey("tokenizer.ggml.eot_token_id", undefined);
  const eomId = idKey("tokenizer.ggml.eom_token_id", undefined);
  const unkId = idKey("tokenizer.ggml.unknown_token_id", defaults.unk);

  const eosIds: number[] = [];
  for (const id of [eosId, eotId, eomId]) if (id !== undefined) eosIds.push(id);
  const endOfGeneration = [...END_OF_GENERATION_TEXTS].flatMap((text) => tokens.indicesOf(text));
  for (const id of endOfGeneration.sort((x, y) => x - y)) {
    eosIds.push(id);
    // llama.cpp overrides the type of such tokens to control.
    kinds[id] = TokenKind.Control;
  }

  const pre = md.string("tokenizer.ggml.pre");
  const common = {
    source,
    tokens,
    kinds: kinds as unknown as ArrayLike<TokenKind>,
    unkId,
    bosId,
    eosId,
    eosIds,
    addEos: md.bool("tokenizer.ggml.add_eos_token") ?? false,
    chatTemplate: md.string("tokenizer.chat_template"),
    chatTemplateSource: `${source} metadata tokenizer.chat_template`,
  };

  let spec: VocabularySpec;
  if (sentencePiece) {
    const scores = md.numberArray("tokenizer.ggml.scores", n) ?? new Float32Array(n);
    const addSpacePrefix = md.bool("tokenizer.ggml.add_space_prefix") ?? true;
    spec = {
      ...common,
      merge: { by: "score", scores },
      byteLevel: false,
      addSpacePrefix,
      stripLeadingSpace: addSpacePrefix,
      addBos: md.bool("tokenizer.ggml.add_bos_token") ?? true,
    };
  } else {
    const mergeLines = md.stringArray("tokenizer.ggml.merges");
    if (!mergeLines) {
      throw new InferenceError("MODEL_FORMAT", `${source}: a gpt2 tokenizer needs metadata tokenizer.ggml.merges`, {
        details: { source, field: "tokenizer.ggml.merges" },
      });
    }
    const preTokenizer = preTokenizerForGguf(pre, source);
    spec = {
      ...common,
      merge: { by: "rank", merges: mergeLines, field: "tokenizer.ggml.merges" },
      byteLevel: true,
      preTokenizer: preTokenizer.patterns,
      ignoreMerges: preTokenizer.ignoreMerges,
      // llama.cpp turns BOS on for the Llama 3 family unless the file says otherwise.
      addBos: md.bool("tokenizer.ggml.add_bos_token") ?? preTokenizer.ignoreMerges,
    };
  }
  return new VocabTokenizer(spec);
}
