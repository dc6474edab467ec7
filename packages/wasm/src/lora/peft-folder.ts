/** PEFT adapter folders on disk: read, and written file by file through a temporary name and a rename. */
import { InferenceError, isInferenceError } from "@infer/core";
import { platform } from "#platform";
import type { LoraAdapter } from "./adapter.js";
import { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE, parsePeftConfig, peftAdapterFromBytes, peftFolderFiles } from "./peft.js";

const { join } = platform.files;

export async function readPeftFolder(dir: string): Promise<LoraAdapter> {
  const configFile = join(dir, PEFT_CONFIG_FILE);
  let text: string;
  try {
    text = await platform.files.readText(configFile);
  } catch (error) {
    if (isInferenceError(error, "MODEL_FORMAT")) throw error;
    throw new InferenceError("MODEL_NOT_FOUND", `${dir}: no ${PEFT_CONFIG_FILE}; a PEFT adapter folder has one`, {
      cause: error,
      details: { file: configFile },
    });
  }
  const config = parsePeftConfig(text, configFile);
  const weightsFile = join(dir, PEFT_WEIGHTS_FILE);
  let weights: Uint8Array;
  try {
    weights = await platform.files.readBytes(weightsFile, "safetensors");
  } catch (error) {
    if (!isInferenceError(error, "MODEL_NOT_FOUND")) throw error;
    throw new InferenceError("MODEL_NOT_FOUND", `${dir}: no ${PEFT_WEIGHTS_FILE} (adapter_model.bin is not read: save with safetensors)`, {
      cause: error,
      details: { file: weightsFile },
    });
  }
  return peftAdapterFromBytes(config, weights, dir, weightsFile);
}

export interface WritePeftOptions {
  /** base_model_name_or_path; default the adapter's own. */
  baseModel?: string;
}

/** Writes adapter_config.json and adapter_model.safetensors into dir (made when missing). */
export async function writePeftFolder(dir: string, adapter: LoraAdapter, options: WritePeftOptions = {}): Promise<void> {
  for (const [name, data] of Object.entries(peftFolderFiles(adapter, options.baseModel))) await writeAtomically(join(dir, name), data);
}

/** A reader never sees half a file: the bytes go to a temporary name beside it, then take its name. */
export const writeAtomically = (path: string, data: Uint8Array | string): Promise<void> => platform.files.writeAtomically(path, data);
