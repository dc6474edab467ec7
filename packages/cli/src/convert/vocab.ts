import { InferenceError } from "@infer/core";
import { GgufTokenType } from "@infer/formats";
import type { ArchPlan } from "./config.js";
import { type Metadata, u32 } from "./values.js";

type Json = Record<string, unknown>;

interface HfTokenizer {
  model: { type?: string; vocab?: Record<string, number>; merges?: Array<string | [string, string]>; byte_fallback?: boolean; unk_token?: string };
  added_tokens?: Array<{ id: number; content: string; special?: boolean }>;
  normalizer?: Json | null;
  pre_tokenizer?: Json | null;
  post_processor?: Json | null;
  decoder?: Json | null;
}

/** Every component type in a (possibly nested Sequence) tokenizer part. */
function componentTypes(part: Json | null | undefined): string[] {
  if (!part) return [];
  const nested = [part.normalizers, part.pretokenizers, part.decoders, part.processors].find(Array.isArray) as Json[] | undefined;
  return [String(part.type), ...(nested ?? []).flatMap(componentTypes)];
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && typeof (value as Json).content === "string") return (value as Json).content as string;
  return undefined;
}

/**
 * GGUF tokenizer metadata from tokenizer.json (+ tokenizer_config.json):
 * SentencePiece-style BPE (▁ for spaces, byte fallback) becomes llama.cpp's
 * "llama" vocabulary with merge ranks as scores; byte-level BPE becomes
 * "gpt2" with its merges and a pre-tokenizer name.
 */
export function vocabMetadata(tokenizer: HfTokenizer, tokenizerConfig: Json, config: Json, plan: ArchPlan, file: string): Metadata {
  const model = tokenizer.model;
  if (model?.type !== "BPE" || typeof model.vocab !== "object" || !Array.isArray(model.merges)) {
    throw new InferenceError("UNSUPPORTED", `${file}: only BPE tokenizers can be converted (found ${model?.type ?? "none"})`, { details: { file } });
  }
  const byId = new Map<number, string>();
  for (const [text, id] of Object.entries(model.vocab)) byId.set(id, text);
  const special = new Set<number>();
  for (const added of tokenizer.added_tokens ?? []) {
    byId.set(added.id, added.content);
    if (added.special) special.add(added.id);
  }
  const largest = Math.max(...byId.keys());
  if (largest >= plan.vocabSize) {
    throw new InferenceError("MODEL_FORMAT", `${file}: token id ${largest} is beyond the model's vocab_size ${plan.vocabSize}`, { details: { file } });
  }
  const idOf = new Map<string, number>([...byId].map(([id, text]) => [text, id]));
  const byteLevel = [...componentTypes(tokenizer.pre_tokenizer), ...componentTypes(tokenizer.decoder)].includes("ByteLevel");
  const merges = model.merges.map((m) => (Array.isArray(m) ? m : (m.split(" ") as [string, string])));

  const tokens: string[] = [];
  const types = new Int32Array(plan.vocabSize);
  const scores = new Float32Array(plan.vocabSize);
  const unk = model.unk_token !== undefined ? idOf.get(model.unk_token) : undefined;
  for (let id = 0; id < plan.vocabSize; id++) {
    const text = byId.get(id);
    // Embedding rows past the tokenizer's vocabulary are padding.
    tokens.push(text ?? `[PAD${id}]`);
    types[id] =
      text === undefined ? GgufTokenType.Unused
      : id === unk ? GgufTokenType.Unknown
      : special.has(id) ? GgufTokenType.Control
      : !byteLevel && /^<0x[0-9A-F]{2}>$/.test(text) ? GgufTokenType.Byte
      : tokenizer.added_tokens?.some((t) => t.id === id) ? GgufTokenType.UserDefined
      : GgufTokenType.Normal;
  }
  const meta: Metadata = { "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types };
  if (byteLevel) {
    meta["tokenizer.ggml.model"] = "gpt2";
    meta["tokenizer.ggml.pre"] = preTokenizerName(tokenizer, plan);
    meta["tokenizer.ggml.merges"] = merges.map(([a, b]) => `${a} ${b}`);
  } else {
    // SentencePiece-style BPE in llama.cpp merges the best-scoring adjacent pair first: score = -merge rank.
    merges.forEach(([a, b], rank) => {
      const id = idOf.get(a + b);
      if (id !== undefined && scores[id] === 0) scores[id] = -(rank + 1);
    });
    meta["tokenizer.ggml.model"] = "llama";
    meta["tokenizer.ggml.scores"] = scores;
    meta["tokenizer.ggml.add_space_prefix"] = componentTypes(tokenizer.normalizer).includes("Prepend") || componentTypes(tokenizer.pre_tokenizer).includes("Metaspace");
  }
  const specialIds: Array<[string, unknown, unknown]> = [
    ["bos", tokenizerConfig.bos_token, config.bos_token_id],
    ["eos", tokenizerConfig.eos_token, Array.isArray(config.eos_token_id) ? config.eos_token_id[0] : config.eos_token_id],
    ["unknown", tokenizerConfig.unk_token, unk],
    ["padding", tokenizerConfig.pad_token, config.pad_token_id],
  ];
  for (const [name, text, fallback] of specialIds) {
    const asText = tokenText(text);
    const id = asText !== undefined ? idOf.get(asText) : typeof fallback === "number" ? fallback : undefined;
    if (id !== undefined) meta[`tokenizer.ggml.${name}_token_id`] = u32(id);
  }
  meta["tokenizer.ggml.add_bos_token"] = typeof tokenizerConfig.add_bos_token === "boolean" ? tokenizerConfig.add_bos_token : postProcessorAddsBos(tokenizer);
  if (typeof tokenizerConfig.add_eos_token === "boolean") meta["tokenizer.ggml.add_eos_token"] = tokenizerConfig.add_eos_token;
  return meta;
}

/** True when the post-processor puts a special token before the sequence (a BOS). */
function postProcessorAddsBos(tokenizer: HfTokenizer): boolean {
  const processors = [tokenizer.post_processor, ...((tokenizer.post_processor?.processors as Json[] | undefined) ?? [])];
  return processors.some((p) => p?.type === "TemplateProcessing" && Array.isArray(p.single) && typeof (p.single[0] as Json)?.SpecialToken === "object");
}

/** llama.cpp picks its pre-tokenizer regex by name; these are the families recognised here. */
function preTokenizerName(tokenizer: HfTokenizer, plan: ArchPlan): string {
  if (plan.arch === "qwen2" || plan.arch === "qwen3") return "qwen2";
  const text = JSON.stringify(tokenizer.pre_tokenizer ?? {});
  if (text.includes("(?i:'s|'t|'re|'ve|'m|'ll|'d)") && text.includes("\\\\p{N}{1,3}")) return "llama-bpe";
  if (componentTypes(tokenizer.pre_tokenizer).includes("Digits")) return "smollm";
  return "default";
}
