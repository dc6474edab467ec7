// llama.cpp's SentencePiece tokenizer spells a character its vocabulary lacks as byte tokens: "<0xE2>", or
// else the byte itself as a one-byte token. Where the vocabulary has neither for some byte, that lookup
// throws a C++ exception (std::out_of_range) that nothing on the way to JavaScript catches, and the whole
// process terminates, on text any user can send. Real models have such vocabularies (tinystories-656k,
// converted, lacks 179 of the 256 byte tokens) and llama.cpp loads them, so the model is kept: text within
// the vocabulary encodes as before, and the rest is refused before llama.cpp sees it.
import { InferenceError } from "@infer/core";
import { type GgufHeader, GgufTokenType, getArray, getString, getStringArray, type PackedStrings } from "@infer/formats";
import { formatError } from "./format-error.js";

/** Throws UNSUPPORTED for text llama.cpp could not tokenize with this vocabulary without terminating. */
export type TextGuard = (text: string) => void;

/** SentencePiece's stand-in for a space in token texts. */
const SPACE = "\u2581";
/**
 * What node-llama-cpp tokenizes while it loads a model (LlamaModel.getWarnings: a test text, behind a newline
 * that keeps its leading space): it must encode, or loading ends the process.
 */
const LOAD_TEXT = "\nsome test text here";

const hex = (byte: number) => `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`;

/**
 * The guard for a model whose SentencePiece vocabulary misses byte tokens, undefined for every other model;
 * MODEL_FORMAT when even node-llama-cpp's own text at load could not be encoded.
 */
export function byteFallbackGuard(header: GgufHeader): TextGuard | undefined {
  const { metadata } = header;
  if (getString(metadata, "tokenizer.ggml.model") !== "llama") return undefined;
  const tokens = getStringArray(metadata, "tokenizer.ggml.tokens");
  if (tokens === undefined) return undefined;
  const missing = missingBytes(tokens);
  if (missing.size === 0) return undefined;

  // A character that is a token of its own needs no bytes (tokens of up to 4 bytes hold one code point at most).
  const singles = new Set<string>();
  for (let id = 0; id < tokens.length; id++) {
    if (tokens.byteLengthOf(id) > 4) continue;
    const text = tokens.get(id);
    if (text.length > 0 && String.fromCodePoint(text.codePointAt(0)!) === text) singles.add(text);
  }
  // Special tokens are matched in the text first and never spelled out: their characters need no bytes either.
  const specials = specialTexts(header, tokens);
  const splitter = specials.length > 0 ? new RegExp(specials.map(escapeRegExp).join("|")) : undefined;
  const utf8 = new TextEncoder();
  const guard: TextGuard = (text) => {
    for (const fragment of splitter ? text.split(splitter) : [text]) {
      // Spaces become "▁", and a fragment may get one in front (add_space_prefix).
      for (const char of SPACE + fragment.replaceAll(" ", SPACE)) {
        if (singles.has(char)) continue;
        const bytes = [...utf8.encode(char)];
        const lacking = bytes.filter((byte) => missing.has(byte));
        if (lacking.length === 0) continue;
        const code = `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
        throw new InferenceError(
          "UNSUPPORTED",
          `${header.source}: this model cannot encode the character ${JSON.stringify(char)} (${code}): its vocabulary holds ` +
            `neither the character nor the byte tokens to spell it (${lacking.map(hex).join(" ")}), and llama.cpp would ` +
            `end the process trying; backend "wasm" encodes it as the unknown token`,
          { details: { file: header.source, character: char } },
        );
      }
    }
  };
  try {
    guard(LOAD_TEXT);
  } catch {
    throw formatError(
      header.source,
      "tokenizer.ggml.tokens",
      `lacks ${missing.size} of the 256 byte tokens, and the characters to spell ${JSON.stringify(LOAD_TEXT)}, which node-llama-cpp tokenizes while loading (llama.cpp would end the process)`,
    );
  }
  return guard;
}

/** Bytes with neither a "<0xNN>" token nor a one-byte token. */
function missingBytes(tokens: PackedStrings): Set<number> {
  const present = new Set<number>();
  for (let id = 0; id < tokens.length; id++) {
    const length = tokens.byteLengthOf(id);
    if (length === 1) present.add(tokens.bytesOf(id)[0]!);
    if (length !== 6) continue;
    const match = /^<0x([0-9A-F]{2})>$/.exec(tokens.get(id));
    if (match) present.add(Number.parseInt(match[1]!, 16));
  }
  const missing = new Set<number>();
  for (let byte = 0; byte < 256; byte++) if (!present.has(byte)) missing.add(byte);
  return missing;
}

/** Texts of the tokens llama.cpp matches whole before tokenizing (control, user-defined, unknown), longest first. */
function specialTexts(header: GgufHeader, tokens: PackedStrings): string[] {
  const types = getArray(header.metadata, "tokenizer.ggml.token_type")?.value as ArrayLike<number> | undefined;
  if (types === undefined) return [];
  const special = new Set<number>([GgufTokenType.Control, GgufTokenType.UserDefined, GgufTokenType.Unknown]);
  const found: string[] = [];
  for (let id = 0; id < Math.min(types.length, tokens.length); id++) {
    if (!special.has(types[id]!)) continue;
    const text = tokens.get(id);
    if (text !== "") found.push(text);
  }
  return found.sort((a, b) => b.length - a.length);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
