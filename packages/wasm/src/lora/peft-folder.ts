/** PEFT adapter folders on disk: read, and written file by file through a temporary name and a rename. */
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError, isInferenceError } from "@infer/core";
import { writeSafetensors } from "@infer/formats";
import { readWholeFile } from "@infer/formats/node";
import type { LoraAdapter } from "./adapter.js";
import { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE, parsePeftConfig, peftAdapterFromBytes, peftConfigJson, peftTensors } from "./peft.js";

export async function readPeftFolder(dir: string): Promise<LoraAdapter> {
  const configFile = join(dir, PEFT_CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(configFile, "utf8");
  } catch (error) {
    throw new InferenceError("MODEL_NOT_FOUND", `${dir}: no ${PEFT_CONFIG_FILE}; a PEFT adapter folder has one`, {
      cause: error,
      details: { file: configFile },
    });
  }
  const config = parsePeftConfig(text, configFile);
  const weightsFile = join(dir, PEFT_WEIGHTS_FILE);
  let weights: Uint8Array;
  try {
    weights = await readWholeFile(weightsFile, "safetensors");
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
  const config = peftConfigJson(adapter, options.baseModel);
  // PEFT's own files carry this metadata: transformers reads "pt" as PyTorch tensors.
  const weights = writeSafetensors(peftTensors(adapter), { format: "pt" });
  await mkdir(dir, { recursive: true });
  await writeAtomically(join(dir, PEFT_WEIGHTS_FILE), weights);
  await writeAtomically(join(dir, PEFT_CONFIG_FILE), config);
}

/** A reader never sees half a file: the bytes go to a temporary name beside it, then take its name. */
export async function writeAtomically(path: string, data: Uint8Array | string): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`;
  try {
    await writeFile(temp, data);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    const errno = error as NodeJS.ErrnoException;
    throw new InferenceError("IO", `cannot write ${path}: ${errno.code ?? String(error)}`, { cause: error, details: { path } });
  }
}
