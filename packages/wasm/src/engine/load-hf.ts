/** A Hugging Face model folder: config.json and its safetensors tensors. */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError } from "@infer/core";
import type { StoredTensor } from "./weights.js";

export interface HfFolder {
  config: Record<string, unknown>;
  tensors: Map<string, StoredTensor>;
}

export async function openHfFolder(folder: string): Promise<HfFolder> {
  const configFile = join(folder, "config.json");
  let text: string;
  try {
    text = await readFile(configFile, "utf8");
  } catch (error) {
    throw new InferenceError("MODEL_NOT_FOUND", `${configFile}: cannot read the model configuration`, {
      cause: error,
      details: { file: configFile },
    });
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${configFile}: not valid JSON`, { cause: error, details: { file: configFile } });
  }
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new InferenceError("MODEL_FORMAT", `${configFile}: expected a JSON object`, { details: { file: configFile } });
  }
  throw new InferenceError("UNSUPPORTED", `${folder}: safetensors loading is not wired yet`);
}
