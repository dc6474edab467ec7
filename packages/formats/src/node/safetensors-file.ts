/** safetensors files and Hugging Face model folders on disk. */
import { access, writeFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { InferenceError, isInferenceError, parseModelJson } from "@infer/core";
import { type SafetensorsFile, type SafetensorsModel, type SafetensorsTensor, formatError, isPlainObject, parseSafetensors } from "../safetensors.js";
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
  const indexPath = join(folder, "model.safetensors.index.json");
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
  const { weightMap, metadata } = await readIndex(indexPath);
  const tensors = new Map<string, SafetensorsTensor>();
  const shards = [...new Set(weightMap.values())];
  const files: string[] = [];
  for (const shard of shards) {
    const path = join(folder, shard);
    let file: SafetensorsFile;
    try {
      file = await readSafetensors(path, allocate);
    } catch (error) {
      if (!isInferenceError(error, "MODEL_NOT_FOUND")) throw error;
      throw new InferenceError("MODEL_FORMAT", `${indexPath}: weight_map names shard "${shard}", which is missing`, {
        cause: error,
        details: { file: indexPath, field: "weight_map", shard },
      });
    }
    files.push(path);
    Object.assign(metadata, file.metadata);
    for (const [name, tensor] of file.tensors) {
      if (tensors.has(name)) throw formatError(path, `"${name}"`, `also stored in ${tensors.get(name)!.file}`);
      tensors.set(name, tensor);
    }
  }
  for (const [name, shard] of weightMap) {
    if (tensors.get(name)?.file !== join(folder, shard)) {
      throw formatError(indexPath, `weight_map["${name}"]`, `the tensor is not in shard "${shard}"`);
    }
  }
  return { tensors, metadata, files };
}

async function readIndex(indexPath: string): Promise<{ weightMap: Map<string, string>; metadata: Record<string, string> }> {
  const bytes = await readWholeFile(indexPath, "safetensors index");
  const index = parseModelJson(new TextDecoder().decode(bytes), indexPath);
  if (!isPlainObject(index) || !isPlainObject(index["weight_map"])) {
    throw new InferenceError("MODEL_FORMAT", `${indexPath}: weight_map is missing or not an object`, {
      details: { file: indexPath, field: "weight_map" },
    });
  }
  const weightMap = new Map<string, string>();
  for (const [name, shard] of Object.entries(index["weight_map"])) {
    // Shards live in the model folder: refuse paths that would leave it.
    if (typeof shard !== "string" || shard === "" || isAbsolute(shard) || shard.split(/[\\/]/).includes("..")) {
      throw new InferenceError("MODEL_FORMAT", `${indexPath}: weight_map["${name}"] is not a shard file name in the folder`, {
        details: { file: indexPath, field: `weight_map.${name}` },
      });
    }
    weightMap.set(name, shard);
  }
  const metadata: Record<string, string> = {};
  if (isPlainObject(index["metadata"])) {
    for (const [key, value] of Object.entries(index["metadata"])) metadata[key] = typeof value === "string" ? value : JSON.stringify(value);
  }
  return { weightMap, metadata };
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
