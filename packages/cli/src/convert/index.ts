import { readFile, rename, stat, writeFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { InferenceError } from "@infer/core";
import { GgmlType, toFloat32, writeGguf, type GgufTensorSpec, type GgufValueInput } from "@infer/formats";
import { readSafetensorsModel } from "@infer/formats/node";
import { planFromConfig } from "./config.js";
import { fileTypeOf, ggufName, type OutputType, permuteIfRotary, tensorType } from "./tensors.js";
import { readJsonObject, u32 } from "./values.js";
import { vocabMetadata } from "./vocab.js";

export { CONVERTIBLE_MODEL_TYPES, llama3RopeFactors } from "./config.js";
export { OUTPUT_TYPES, type OutputType, permuteRotaryRows } from "./tensors.js";

export interface ConvertResult {
  path: string;
  architecture: string;
  tensors: number;
  bytes: number;
}

async function readJson(folder: string, name: string, required: boolean): Promise<Record<string, unknown>> {
  const path = join(folder, name);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (!required) return {};
    throw new InferenceError("MODEL_NOT_FOUND", `${folder} has no ${name}; convert needs a Hugging Face model folder`, { cause: error, details: { file: path } });
  }
  return readJsonObject(text, path);
}

/** The chat template from tokenizer_config.json (string or named list) or chat_template.jinja. */
async function chatTemplate(folder: string, tokenizerConfig: Record<string, unknown>): Promise<string | undefined> {
  const value = tokenizerConfig.chat_template;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const named = value.find((t: { name?: string }) => t?.name === "default") ?? value[0];
    if (typeof named?.template === "string") return named.template;
  }
  return readFile(join(folder, "chat_template.jinja"), "utf8").catch(() => undefined);
}

/**
 * Writes a Hugging Face folder (config.json, safetensors, tokenizer.json) as
 * one GGUF file that llama.cpp and the wasm engine read: llama.cpp's tensor
 * names and metadata keys, q/k rows permuted for "llama", and matrices in
 * `type`. The whole model is held in memory while converting.
 */
export async function convertHfToGguf(folder: string, out: string, type: OutputType = "f16"): Promise<ConvertResult> {
  const dir = resolve(folder);
  if (!(await stat(dir).catch(() => undefined))?.isDirectory()) {
    throw new InferenceError("MODEL_NOT_FOUND", `'${folder}' is not a folder; convert takes a Hugging Face model folder`, { details: { path: folder } });
  }
  const config = await readJson(dir, "config.json", true);
  const tokenizer = await readJson(dir, "tokenizer.json", true);
  const tokenizerConfig = await readJson(dir, "tokenizer_config.json", false);
  const plan = planFromConfig(config, join(dir, "config.json"), basename(dir));
  const metadata = {
    ...plan.metadata,
    "general.file_type": u32(fileTypeOf(type)),
    ...(type === "q8_0" || type === "q4_0" ? { "general.quantization_version": u32(2) } : {}),
    ...vocabMetadata(tokenizer as never, tokenizerConfig, config, plan, join(dir, "tokenizer.json")),
  } as Record<string, GgufValueInput>;
  const template = await chatTemplate(dir, tokenizerConfig);
  if (template) metadata["tokenizer.chat_template"] = template;

  const weights = await readSafetensorsModel(dir);
  // Tied checkpoints may store only one of the pair (the other named in __metadata__): either serves as the embedding.
  const embedding = weights.tensors.get("model.embed_tokens.weight") ?? weights.tensors.get("lm_head.weight");
  if (!embedding) throw new InferenceError("MODEL_FORMAT", `${dir}: no model.embed_tokens.weight or lm_head.weight`, { details: { folder: dir } });
  const sources = new Map(weights.tensors);
  sources.set("model.embed_tokens.weight", embedding);
  if (plan.tiedEmbeddings) sources.delete("lm_head.weight");

  const tensors: GgufTensorSpec[] = [];
  for (const [hfName, tensor] of [...sources].sort(([a], [b]) => a.localeCompare(b))) {
    const name = ggufName(hfName, plan.layers);
    if (!name) continue;
    const cols = tensor.shape[tensor.shape.length - 1] ?? 1;
    const values = permuteIfRotary(plan, name, toFloat32(tensor), cols);
    // ggml lists dimensions innermost first: a [rows, cols] matrix is shape [cols, rows].
    tensors.push({ name, shape: [...tensor.shape].reverse(), type: tensorType(tensor.shape, type), data: values });
  }
  if (plan.ropeFactors) tensors.push({ name: "rope_freqs.weight", shape: [plan.ropeFactors.length], type: GgmlType.F32, data: plan.ropeFactors });
  const bytes = writeGguf({ metadata, tensors });
  // Write beside the target, then rename: a failed conversion never leaves half a GGUF under the final name.
  const temp = `${out}.${process.pid}.tmp`;
  await writeFile(temp, bytes);
  await rename(temp, out);
  return { path: resolve(out), architecture: plan.arch, tensors: tensors.length, bytes: bytes.length };
}
