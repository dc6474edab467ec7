import { InferenceError } from "@infer/core";
import type { RepoFile } from "./listing.js";
import type { HubRef } from "./ref.js";

/** GGUF quantizations in the order a pull without a tag prefers them: good quality first, then smaller. */
export const GGUF_PREFERENCE = ["Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_K_S", "Q5_K_S", "Q4_0", "Q5_0", "Q4_1", "F16", "BF16", "F32"];

/** Files a Hugging Face folder needs besides its weights. */
const HF_SIDE_FILES = new Set([
  "config.json",
  "generation_config.json",
  "tokenizer.json",
  "tokenizer_config.json",
  "tokenizer.model",
  "special_tokens_map.json",
  "added_tokens.json",
  "vocab.json",
  "merges.txt",
  "chat_template.jinja",
  "chat_template.json",
  "model.safetensors.index.json",
]);

export type Selection = { format: "gguf"; files: RepoFile[] } | { format: "safetensors"; files: RepoFile[] };

const isGguf = (f: RepoFile) => f.path.toLowerCase().endsWith(".gguf");
const baseName = (path: string) => path.slice(path.lastIndexOf("/") + 1);
/** "model-00001-of-00003.gguf": one shard of a split GGUF. */
const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/i;

/** The quantization tag in a file name, matched as a whole word ("q4_k_m" in "x.Q4_K_M.gguf"). */
function hasQuant(path: string, quant: string): boolean {
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^A-Za-z0-9])${escaped}([^A-Za-z0-9_]|$)`, "i").test(baseName(path));
}

/** A chosen GGUF and, when it is split, its sibling shards. */
function withShards(chosen: RepoFile, files: RepoFile[]): RepoFile[] {
  const split = SPLIT.exec(chosen.path);
  if (!split) return [chosen];
  const stem = chosen.path.slice(0, split.index);
  return files.filter((f) => f.path.startsWith(stem) && SPLIT.test(f.path)).sort((a, b) => a.path.localeCompare(b.path));
}

/**
 * Decides what to download: the named file, the GGUF with the asked quant
 * tag, or without a selector the best GGUF by GGUF_PREFERENCE; a repository
 * without GGUF files gives its safetensors weights with config and tokenizer.
 */
export function selectFiles(ref: HubRef, files: RepoFile[]): Selection {
  const where = `repository ${ref.repo}`;
  if (ref.file) {
    const found = files.find((f) => f.path === ref.file) ?? files.find((f) => baseName(f.path) === ref.file);
    if (!found) throw new InferenceError("MODEL_NOT_FOUND", `${where} has no file '${ref.file}' (GGUF files: ${files.filter(isGguf).map((f) => f.path).join(", ") || "none"})`);
    return { format: "gguf", files: withShards(found, files) };
  }
  const ggufs = files.filter(isGguf).filter((f) => !/mmproj/i.test(f.path));
  if (ref.quant) {
    const matches = ggufs.filter((f) => hasQuant(f.path, ref.quant!));
    if (matches.length === 0) {
      throw new InferenceError("MODEL_NOT_FOUND", `${where} has no GGUF file tagged ${ref.quant} (available: ${ggufs.map((f) => baseName(f.path)).join(", ") || "none"})`);
    }
    return { format: "gguf", files: withShards(matches.sort((a, b) => a.path.localeCompare(b.path))[0]!, files) };
  }
  if (ggufs.length > 0) {
    const rank = (f: RepoFile) => {
      const at = GGUF_PREFERENCE.findIndex((q) => hasQuant(f.path, q));
      return at < 0 ? GGUF_PREFERENCE.length : at;
    };
    const best = [...ggufs].sort((a, b) => rank(a) - rank(b) || a.path.localeCompare(b.path))[0]!;
    return { format: "gguf", files: withShards(best, files) };
  }
  const weights = files.filter((f) => !f.path.includes("/") && f.path.endsWith(".safetensors"));
  if (weights.length === 0 || !files.some((f) => f.path === "config.json")) {
    throw new InferenceError("MODEL_FORMAT", `${where} has neither GGUF files nor safetensors weights with a config.json`);
  }
  return { format: "safetensors", files: files.filter((f) => HF_SIDE_FILES.has(f.path) || weights.includes(f)) };
}
