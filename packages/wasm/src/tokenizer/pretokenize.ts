/**
 * Pre-tokenizers for byte-level BPE: regexes that cut text into words before
 * merging. GGUF names them with `tokenizer.ggml.pre`; the patterns follow
 * llama.cpp's llama-vocab (which rewrites the original Oniguruma patterns).
 * A list of patterns applies one after another, each cutting the pieces the
 * previous left; matches and the gaps between them both become pieces.
 */
import { InferenceError } from "@infer/core";

/**
 * Unicode White_Space, which Oniguruma's and llama.cpp's `\s` mean. JavaScript's
 * `\s` differs (it adds U+FEFF and lacks U+0085), so patterns here never use it.
 */
const WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

/** Writes `\s` / `\S` (inside and outside character classes) as explicit White_Space sets. */
function withExplicitWhitespace(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "\\") {
      const next = pattern[i + 1] ?? "";
      i++;
      if (next === "s") out += inClass ? WS : `[${WS}]`;
      else if (next === "S") {
        if (inClass) throw new Error("\\S inside a character class is not supported");
        out += `[^${WS}]`;
      } else out += ch + next;
      continue;
    }
    if (ch === "[" && !inClass) inClass = true;
    else if (ch === "]" && inClass) inClass = false;
    out += ch;
  }
  return out;
}

/**
 * Rewrites Oniguruma's inline case-insensitive group `(?i:...)` (Node 20 has
 * no inline modifiers) by spelling each ASCII letter as `[xX]`. Only plain
 * literals and alternations occur inside it in tokenizer patterns.
 */
function withoutInlineIgnoreCase(pattern: string): string {
  let out = "";
  let i = 0;
  while (i < pattern.length) {
    if (pattern.startsWith("(?i:", i)) {
      out += "(?:";
      i += 4;
      let depth = 1;
      while (i < pattern.length && depth > 0) {
        const ch = pattern[i]!;
        if (ch === "\\") {
          out += ch + (pattern[i + 1] ?? "");
          i += 2;
          continue;
        }
        if (ch === "(") depth++;
        if (ch === ")") depth--;
        if (/[a-zA-Z]/.test(ch) && depth > 0) out += `[${ch.toLowerCase()}${ch.toUpperCase()}]`;
        else out += ch;
        i++;
      }
      continue;
    }
    const ch = pattern[i]!;
    if (ch === "\\") {
      out += ch + (pattern[i + 1] ?? "");
      i += 2;
      continue;
    }
    out += ch;
    i++;
  }
  return out;
}

/** Compiles a tokenizer regex written for Oniguruma / llama.cpp into a global Unicode JavaScript RegExp. */
export function compileSplitPattern(pattern: string, source: string): RegExp {
  try {
    return new RegExp(withExplicitWhitespace(withoutInlineIgnoreCase(pattern)), "gu");
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${source}: unsupported pre-tokenizer pattern ${JSON.stringify(pattern)}`, {
      cause: error,
      details: { source, pattern },
    });
  }
}

const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
export const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const LLAMA3 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const QWEN2 = `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const UPPER = "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]";
const LOWER = "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]";
const GPT4O =
  `[^\\r\\n\\p{L}\\p{N}]?${UPPER}*${LOWER}+${CONTRACTIONS}?|[^\\r\\n\\p{L}\\p{N}]?${UPPER}+${LOWER}*${CONTRACTIONS}?` +
  `|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const TEKKEN =
  `[^\\r\\n\\p{L}\\p{N}]?${UPPER}*${LOWER}+|[^\\r\\n\\p{L}\\p{N}]?${UPPER}+${LOWER}*` +
  `|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

/** Pattern lists by llama.cpp pre-tokenizer family. */
const FAMILIES: Record<string, readonly string[]> = {
  default: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_PATTERN, "\\p{N}+", "[0-9][0-9][0-9]"],
  llama3: [LLAMA3],
  qwen2: [QWEN2],
  gpt2: [GPT2_PATTERN],
  starcoder: ["\\p{N}", GPT2_PATTERN],
  falcon: ["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_PATTERN, "[0-9][0-9][0-9]"],
  gpt4o: [GPT4O],
  tekken: [TEKKEN],
};

/** `tokenizer.ggml.pre` values and the family each selects (llama.cpp's table, the families above). */
const PRE_NAMES: Record<string, string> = {
  default: "default",
  llama3: "llama3",
  "llama-v3": "llama3",
  "llama-bpe": "llama3",
  falcon3: "llama3",
  "falcon-h1": "llama3",
  pixtral: "llama3",
  "midm-2.0": "llama3",
  lfm2: "llama3",
  dbrx: "llama3",
  "smaug-bpe": "llama3",
  "chatglm-bpe": "llama3",
  glm4: "llama3",
  qwen2: "qwen2",
  "deepseek-r1-qwen": "qwen2",
  stablelm2: "qwen2",
  megrez: "qwen2",
  hunyuan: "qwen2",
  "grok-2": "qwen2",
  "gpt-2": "gpt2",
  "phi-2": "gpt2",
  mpt: "gpt2",
  olmo: "gpt2",
  jais: "gpt2",
  trillion: "gpt2",
  exaone4: "gpt2",
  "roberta-bpe": "gpt2",
  starcoder: "starcoder",
  refact: "starcoder",
  "command-r": "starcoder",
  smollm: "starcoder",
  codeshell: "starcoder",
  exaone: "starcoder",
  "minerva-7b": "starcoder",
  falcon: "falcon",
  "gpt-4o": "gpt4o",
  llama4: "gpt4o",
  tekken: "tekken",
};

/** Pre-type names whose models look a whole word up before merging it (llama.cpp sets ignore_merges for these). */
const IGNORE_MERGES = new Set(["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "tekken"]);

export interface PreTokenizerChoice {
  family: string;
  patterns: RegExp[];
  ignoreMerges: boolean;
}

/**
 * The pre-tokenizer for a GGUF `tokenizer.ggml.pre` value. Like llama.cpp, an
 * unknown or missing name falls back to "default".
 */
export function preTokenizerForGguf(pre: string | undefined, source: string): PreTokenizerChoice {
  const family = PRE_NAMES[pre ?? "default"] ?? "default";
  return {
    family,
    patterns: FAMILIES[family]!.map((p) => compileSplitPattern(p, source)),
    ignoreMerges: IGNORE_MERGES.has(pre ?? ""),
  };
}

/** Cuts `text` with each pattern in turn; every match and every gap between matches is a piece. */
export function splitWords(text: string, patterns: readonly RegExp[]): string[] {
  let pieces = [text];
  for (const pattern of patterns) {
    const next: string[] = [];
    for (const piece of pieces) {
      let last = 0;
      for (const match of piece.matchAll(pattern)) {
        if (match[0].length === 0) continue;
        if (match.index > last) next.push(piece.slice(last, match.index));
        next.push(match[0]);
        last = match.index + match[0].length;
      }
      if (last < piece.length) next.push(piece.slice(last));
    }
    pieces = next;
  }
  return pieces;
}
