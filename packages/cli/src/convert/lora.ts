/**
 * LoRA adapters for the other tools: a PEFT folder as llama.cpp's GGUF LoRA
 * file (`infer convert-lora`), and an adapter baked into its base's weights
 * (`infer merge`). Reading, checking and the q/k row orders are the wasm
 * engine's (@infer/wasm's lora); this module moves files.
 */
import { copyFile, mkdir, readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { InferenceError } from "@infer/core";
import { dequantize, GgmlType, getNumber, getString, toFloat32, typeName, writeGguf, writeSafetensors, type GgufTensorSpec } from "@infer/formats";
import { readGguf, readGgufHeader, readSafetensorsModel } from "@infer/formats/node";
import { loadTransformer, lora, type LoraAdapter, type LoraPair } from "@infer/wasm";
import { planFromConfig } from "./config.js";
import { readJsonObject } from "./values.js";

/** What the q/k row order of a GGUF adapter depends on: the base's architecture and head counts. */
interface BaseShape {
  architecture: string;
  numHeads: number;
  numKVHeads: number;
}

async function isFolder(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() === true;
}

/** A Hugging Face folder's config.json, or a GGUF file's metadata. */
async function baseShape(base: string): Promise<BaseShape> {
  if (await isFolder(base)) {
    const file = join(base, "config.json");
    const text = await readFile(file, "utf8").catch((error: unknown) => {
      throw new InferenceError("MODEL_NOT_FOUND", `${base} has no config.json; --base takes a Hugging Face model folder or a GGUF file`, {
        cause: error,
        details: { file },
      });
    });
    const plan = planFromConfig(readJsonObject(text, file), file, base);
    return { architecture: plan.arch, numHeads: plan.heads, numKVHeads: plan.kvHeads };
  }
  const header = await readGgufHeader(base);
  const architecture = getString(header.metadata, "general.architecture", true);
  const numHeads = getNumber(header.metadata, `${architecture}.attention.head_count`, true);
  return { architecture, numHeads, numKVHeads: getNumber(header.metadata, `${architecture}.attention.head_count_kv`) ?? numHeads };
}

export interface LoraConversion {
  path: string;
  architecture: string;
  pairs: number;
  bytes: number;
}

/**
 * A PEFT folder as a GGUF LoRA file for a base of `base`'s architecture (default:
 * the adapter's base_model_name_or_path, when that is a local folder).
 */
export async function convertLoraToGguf(adapterDir: string, out: string, base?: string): Promise<LoraConversion> {
  const adapter = await lora.readPeftFolder(adapterDir);
  const basePath = base ?? adapter.baseModel;
  if (basePath === undefined || (base === undefined && !(await isFolder(basePath)))) {
    throw new InferenceError(
      "INVALID_OPTION",
      `${adapterDir}: the base model is needed (its architecture and head counts): pass --base <hf-folder|model.gguf>` +
        (basePath === undefined ? "" : `; base_model_name_or_path "${basePath}" is not a local folder`),
      { details: { option: "base" } },
    );
  }
  const shape = await baseShape(basePath);
  const inGgufOrder = lora.inLayout(adapter, "gguf", shape.architecture, shape);
  const bytes = writeGguf(lora.ggufLoraSpec(inGgufOrder, shape.architecture));
  await lora.writeAtomically(out, bytes);
  return { path: resolve(out), architecture: shape.architecture, pairs: adapter.pairs.length, bytes: bytes.length };
}

export interface MergeResult {
  path: string;
  format: "gguf" | "safetensors";
  /** Matrices the adapter changed. */
  merged: number;
  /** Quantized types of changed matrices, dequantized, merged and quantized again (lossy). */
  reencoded: string[];
}

/**
 * Bakes an adapter into its base: a GGUF file into a GGUF file, a Hugging Face
 * folder into a folder (its other files copied, the weights in one
 * model.safetensors). The adapter is checked against the model as loading it
 * with adapterPath would; the whole model is held in memory.
 */
export async function mergeAdapter(model: string, adapterPath: string, out: string): Promise<MergeResult> {
  const adapter = await lora.readLoraAdapter(adapterPath);
  const loaded = await loadTransformer(model);
  let fitted: LoraAdapter;
  try {
    fitted = lora.fitAdapter(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
  } finally {
    await loaded.transformer.dispose();
  }
  return loaded.format === "gguf" ? mergeIntoGguf(model, fitted, out) : mergeIntoHf(model, fitted, out);
}

async function mergeIntoGguf(model: string, adapter: LoraAdapter, out: string): Promise<MergeResult> {
  const gguf = await readGguf(model);
  const pairs = new Map(adapter.pairs.map((pair) => [lora.baseWeightName(pair.layer, pair.module), pair]));
  const reencoded = new Set<string>();
  const tensors: GgufTensorSpec[] = gguf.tensors.map((info) => {
    const bytes = gguf.tensorData(info);
    const pair = pairs.get(info.name);
    if (!pair) return { name: info.name, shape: info.shape, type: info.type, data: bytes };
    const values = dequantize(info.type, bytes, pair.outFeatures * pair.inFeatures);
    lora.mergePairInto(values, adapter, pair);
    if (info.type !== GgmlType.F32 && info.type !== GgmlType.F16 && info.type !== GgmlType.BF16) reencoded.add(typeName(info.type));
    // The writer encodes the floats in the tensor's own type again.
    return { name: info.name, shape: info.shape, type: info.type, data: values };
  });
  const bytes = writeGguf({ metadata: gguf.metadata, tensors });
  await lora.writeAtomically(out, bytes);
  return { path: resolve(out), format: "gguf", merged: pairs.size, reencoded: [...reencoded] };
}

async function mergeIntoHf(folder: string, adapter: LoraAdapter, out: string): Promise<MergeResult> {
  const weights = await readSafetensorsModel(folder);
  const pairs = new Map<string, LoraPair>(adapter.pairs.map((pair) => [`model.layers.${pair.layer}.${lora.hfModulePath(pair.module)}.weight`, pair]));
  for (const name of pairs.keys()) {
    if (!weights.tensors.has(name)) {
      throw new InferenceError("UNSUPPORTED", `${folder}: no tensor ${name} to merge into (only the plain model.layers.N layout is merged)`, {
        details: { file: folder, tensor: name },
      });
    }
  }
  const tensors = [...weights.tensors.values()].map((tensor) => {
    if (tensor.dtype !== "F32" && tensor.dtype !== "F16" && tensor.dtype !== "BF16") {
      throw new InferenceError("UNSUPPORTED_DTYPE", `${tensor.file}: tensor ${tensor.name} is ${tensor.dtype}; merge writes F32, F16 and BF16`, {
        details: { file: tensor.file, tensor: tensor.name },
      });
    }
    const values = toFloat32(tensor);
    const pair = pairs.get(tensor.name);
    if (pair) lora.mergePairInto(values, adapter, pair);
    return { name: tensor.name, dtype: tensor.dtype, shape: tensor.shape, data: values };
  });
  await mkdir(out, { recursive: true });
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    if (!entry.isFile() || entry.name.endsWith(".safetensors") || entry.name === "model.safetensors.index.json") continue;
    await copyFile(join(folder, entry.name), join(out, entry.name));
  }
  // The shards' __metadata__ goes along: it names the other names of a tied matrix stored once.
  await lora.writeAtomically(join(out, "model.safetensors"), writeSafetensors(tensors, { ...weights.metadata, format: "pt" }));
  return { path: resolve(out), format: "safetensors", merged: pairs.size, reencoded: [] };
}
