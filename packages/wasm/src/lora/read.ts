/** readLoraAdapter: a PEFT folder (or its adapter_config.json) or a llama.cpp GGUF LoRA file. */
import { stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { InferenceError } from "@infer/core";
import { readGguf } from "@infer/formats/node";
import type { LoraAdapter } from "./adapter.js";
import { adapterFromGguf } from "./gguf-lora.js";
import { PEFT_CONFIG_FILE } from "./peft.js";
import { readPeftFolder } from "./peft-folder.js";

export async function readLoraAdapter(path: string): Promise<LoraAdapter> {
  const info = await stat(path).catch((error: unknown) => {
    throw new InferenceError("MODEL_NOT_FOUND", `no LoRA adapter at '${path}'`, { cause: error, details: { file: path } });
  });
  if (info.isDirectory()) return readPeftFolder(path);
  if (basename(path) === PEFT_CONFIG_FILE) return readPeftFolder(dirname(path));
  return adapterFromGguf(await readGguf(path), path);
}

/**
 * A warning when the adapter names a base (base_model_name_or_path) that does
 * not look like the model's file or folder. Only a warning: names change with
 * copies and conversions, while the shapes, checked when the adapter is
 * fitted, are what must agree.
 */
export function baseModelWarning(adapter: LoraAdapter, modelPath: string): string | undefined {
  if (adapter.baseModel === undefined) return undefined;
  const stem = (path: string) => basename(path.replace(/[\\/]+$/, "")).replace(/\.(gguf|safetensors)$/i, "").toLowerCase();
  const named = stem(adapter.baseModel);
  const model = stem(modelPath);
  if (named === "" || model.includes(named) || named.includes(model)) return undefined;
  return `the LoRA adapter ${adapter.source} was made for ${adapter.baseModel}; applied to ${modelPath}`;
}
