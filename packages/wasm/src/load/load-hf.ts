/** A Hugging Face model folder: config.json and its safetensors tensors. */
import { InferenceError, isInferenceError, parseModelJson } from "@infer/core";
import { GgmlType } from "@infer/formats";
import { UNSUPPORTED_TYPE, type StoredTensor } from "../engine/weights.js";
import type { BufferAllocator } from "../platform/types.js";
import type { ModelFolder } from "../sources/folder.js";

export interface HfFolder {
  config: Record<string, unknown>;
  tensors: Map<string, StoredTensor>;
}

/** `allocate`: where the safetensors files are read to (see readWholeFile). */
export async function openHfFolder(folder: ModelFolder, allocate?: BufferAllocator): Promise<HfFolder> {
  const configFile = folder.pathOf("config.json");
  let text: string | undefined;
  try {
    text = await folder.readText("config.json");
  } catch (error) {
    // There but unreadable as a file (a pipe, a device): the reader's own MODEL_FORMAT says so.
    if (isInferenceError(error, "MODEL_FORMAT")) throw error;
    throw new InferenceError("MODEL_NOT_FOUND", `${configFile}: cannot read the model configuration`, {
      cause: error,
      details: { file: configFile },
    });
  }
  if (text === undefined) {
    throw new InferenceError("MODEL_NOT_FOUND", `${configFile}: cannot read the model configuration (missing)`, { details: { file: configFile } });
  }
  const config = parseModelJson(text, configFile);
  if (!config || typeof config !== "object" || Array.isArray(config)) {
    throw new InferenceError("MODEL_FORMAT", `${configFile}: expected a JSON object`, { details: { file: configFile } });
  }
  const model = await folder.readSafetensors(allocate);
  const tensors = new Map<string, StoredTensor>();
  for (const [name, tensor] of model.tensors) {
    const type = FLOAT_DTYPES[tensor.dtype];
    // Integer tensors (e.g. position ids) are never weights; skip them, and fail only
    // when a weight itself comes in a dtype the engine cannot read.
    tensors.set(name, { shape: tensor.shape, type: type ?? UNSUPPORTED_TYPE, data: tensor.data, dtype: tensor.dtype });
  }
  // A file that stores a tied matrix once names its other names in __metadata__
  // ("model.embed_tokens.weight": "lm_head.weight").
  for (const [alias, target] of Object.entries(model.metadata)) {
    const stored = tensors.get(target);
    if (stored && !tensors.has(alias)) tensors.set(alias, stored);
  }
  return { config: config as Record<string, unknown>, tensors };
}

const FLOAT_DTYPES: Readonly<Record<string, GgmlType>> = {
  F32: GgmlType.F32,
  F16: GgmlType.F16,
  BF16: GgmlType.BF16,
};
