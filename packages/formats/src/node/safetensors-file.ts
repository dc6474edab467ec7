/** safetensors files and Hugging Face model folders on disk. */
import { access, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError } from "@infer/core";
import { type SafetensorsFile, type SafetensorsModel, parseSafetensors } from "../safetensors.js";
import { SAFETENSORS_INDEX, parseSafetensorsIndex, readSafetensorsShards } from "../safetensors-index.js";
import { type SafetensorsTensorSpec, writeSafetensors } from "../safetensors-writer.js";
import { type FileBufferAllocator, readWholeFile } from "./read-file.js";

export async function readSafetensors(path: string, allocate?: FileBufferAllocator): Promise<SafetensorsFile> {
  return parseSafetensors(await readWholeFile(path, "safetensors", allocate), path);
}

/**
 * Reads a Hugging Face model folder's weights: `model.safetensors.index.json`
 * with its shards when present, else `model.safetensors`.
 */
export async function readSafetensorsModel(folder: string, allocate?: FileBufferAllocator): Promise<SafetensorsModel> {
  const indexPath = join(folder, SAFETENSORS_INDEX);
  if (!(await exists(indexPath))) {
    const single = join(folder, "model.safetensors");
    if (!(await exists(single))) {
      throw new InferenceError("MODEL_NOT_FOUND", `${folder}: no model.safetensors or model.safetensors.index.json`, {
        details: { file: folder },
      });
    }
    const file = await readSafetensors(single, allocate);
    return { tensors: file.tensors, metadata: file.metadata, files: [single] };
  }
  const index = parseSafetensorsIndex(new TextDecoder().decode(await readWholeFile(indexPath, "safetensors index")), indexPath);
  return readSafetensorsShards(indexPath, index, (shard) => readSafetensors(join(folder, shard), allocate));
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

export async function writeSafetensorsFile(
  path: string,
  tensors: SafetensorsTensorSpec[],
  metadata?: Record<string, string>,
): Promise<void> {
  await writeFile(path, writeSafetensors(tensors, metadata));
}
