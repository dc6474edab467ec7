// The vocabulary as llama.cpp's llama_vocab::load reads it: raw arrays indexed by token id, and
// the embedding and output matrices sized by the vocabulary.
import { type GgufHeader, GgufTokenType, GgufValueType, getArray, getNumber, getString, getStringArray, type PackedStrings, valueTypeName } from "@infer/formats";
import { formatError } from "./format-error.js";

/** Token ids stored as u32 or i32 that mean "none". */
const NO_TOKEN = new Set([-1, 2 ** 32 - 1]);
/** Special tokens a generation starts and stops on: an id outside the vocabulary would never match. */
const SPECIAL_TOKEN_KEYS = ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"];

export function assertVocabulary(header: GgufHeader, arch: string): void {
  const { metadata, source: file } = header;
  const tokens = getStringArray(metadata, "tokenizer.ggml.tokens");
  if (tokens === undefined) return; // llama.cpp then loads no vocabulary, or refuses the file itself
  const size = tokens.length;
  if (size === 0) throw formatError(file, "tokenizer.ggml.tokens", "is empty");
  assertDistinctTokens(file, tokens);
  // llama.cpp reads scores[i] and token_type[i] for every token id straight from the arrays.
  arrayFor(header, "tokenizer.ggml.scores", size, [GgufValueType.FLOAT32, GgufValueType.INT32]);
  arrayFor(header, "tokenizer.ggml.token_type", size, [GgufValueType.INT32]);
  assertNoWordPieceBytes(header);
  for (const name of SPECIAL_TOKEN_KEYS) {
    const id = getNumber(metadata, name);
    if (id !== undefined && !NO_TOKEN.has(id) && !(Number.isInteger(id) && id >= 0 && id < size)) {
      throw formatError(file, name, `${id} is outside the vocabulary of ${size} tokens`);
    }
  }
  const embedding = getNumber(metadata, `${arch}.embedding_length`);
  for (const name of ["token_embd.weight", "output.weight"]) {
    const tensor = header.tensorByName(name);
    if (!tensor) continue;
    const [columns, rows] = tensor.shape;
    if (tensor.shape.length !== 2 || rows !== size) {
      throw formatError(file, `tensor "${name}"`, `has shape [${tensor.shape.join(", ")}], not [${embedding ?? "embedding_length"}, ${size}] for a vocabulary of ${size} tokens`);
    }
    if (embedding !== undefined && columns !== embedding) {
      throw formatError(file, `tensor "${name}"`, `has rows of ${columns}, not ${arch}.embedding_length ${embedding}`);
    }
  }
}

/** A per-token array: one of `types`, at least one item per token. */
function arrayFor(header: GgufHeader, name: string, size: number, types: GgufValueType[]): void {
  const array = getArray(header.metadata, name);
  if (array === undefined) return;
  if (!types.includes(array.itemType)) {
    const expected = types.map((type) => `ARRAY of ${valueTypeName(type)}`).join(" or ");
    throw formatError(header.source, name, `has type ARRAY of ${valueTypeName(array.itemType)}, expected ${expected}`);
  }
  const length = (array.value as ArrayLike<unknown>).length;
  if (length < size) throw formatError(header.source, name, `holds ${length} items for a vocabulary of ${size} tokens`);
}

/**
 * llama.cpp maps each token's text back to its id and asserts that no two
 * ids share a text. It keeps the text as a C string, so "i\0" and "i" are the
 * same token to it. Compared as bytes (windows-1252 decodes each byte to its
 * own code point), so two invalid UTF-8 texts are not taken for one.
 */
function assertDistinctTokens(file: string, tokens: PackedStrings): void {
  const bytesAsText = new TextDecoder("windows-1252");
  const seen = new Map<string, number>();
  for (let id = 0; id < tokens.length; id++) {
    const bytes = tokens.bytesOf(id);
    const nul = bytes.indexOf(0);
    const text = bytesAsText.decode(nul === -1 ? bytes : bytes.subarray(0, nul));
    const first = seen.get(text);
    if (first !== undefined) {
      throw formatError(file, "tokenizer.ggml.tokens", `has token ${id} with the same text as token ${first} (${JSON.stringify(tokens.get(first).slice(0, 40))})`);
    }
    seen.set(text, id);
  }
}

/**
 * llama.cpp renders every token's text once at load, and a byte token (type 6) of a WordPiece ("bert")
 * vocabulary reaches a GGML_ABORT there: WordPiece has no byte fallback. Real ones have no byte tokens.
 */
function assertNoWordPieceBytes(header: GgufHeader): void {
  if (getString(header.metadata, "tokenizer.ggml.model") !== "bert") return;
  const types = getArray(header.metadata, "tokenizer.ggml.token_type")?.value as ArrayLike<number> | undefined;
  const id = types === undefined ? -1 : Array.prototype.findIndex.call(types, (type: number) => type === GgufTokenType.Byte);
  if (id >= 0) {
    throw formatError(header.source, "tokenizer.ggml.token_type", `marks token ${id} as a byte token, which a WordPiece ("bert") vocabulary cannot have: llama.cpp aborts rendering it`);
  }
}
