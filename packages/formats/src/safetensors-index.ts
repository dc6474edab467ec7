/**
 * A sharded safetensors model: `model.safetensors.index.json` names, for each tensor, the shard
 * file in the same folder that holds it. Portable: the shards are read by the caller (from disk,
 * or downloaded), one at a time.
 */
import { InferenceError, isInferenceError, parseModelJson } from "@infer/core";
import { type SafetensorsFile, type SafetensorsModel, type SafetensorsTensor, formatError, isPlainObject } from "./safetensors.js";

export const SAFETENSORS_INDEX = "model.safetensors.index.json";

export interface SafetensorsIndex {
  /** Tensor name → shard file name. */
  weightMap: Map<string, string>;
  /** The index's "metadata", values stringified. */
  metadata: Record<string, string>;
  /** The shard file names, each once, in the order the index first names them. */
  shards: string[];
}

/** A shard name that stays in the model folder: relative, no "..", no drive or scheme. */
function isFolderName(shard: unknown): shard is string {
  return typeof shard === "string" && shard !== "" && !/^[\\/]/.test(shard) && !shard.includes(":") && !shard.split(/[\\/]/).includes("..");
}

/** MODEL_FORMAT: the index names a shard (for tensor `tensor`) that is not a file name in its folder. */
export function outsideFolder(indexPath: string, shard: string, tensor?: string): InferenceError {
  const entry = tensor === undefined ? "weight_map" : `weight_map["${tensor}"]`;
  return new InferenceError("MODEL_FORMAT", `${indexPath}: ${entry} names "${shard}", which is not a shard file name in the folder`, {
    details: { file: indexPath, field: tensor === undefined ? "weight_map" : `weight_map.${tensor}`, shard },
  });
}

/** MODEL_FORMAT: the index names a shard the folder does not have (`file`: its full path or URL). */
export function missingShard(indexPath: string, shard: string, file: string, cause?: unknown): InferenceError {
  return new InferenceError("MODEL_FORMAT", `${indexPath}: weight_map names shard "${shard}", which is missing (${file})`, {
    cause,
    details: { file: indexPath, field: "weight_map", shard, missing: file },
  });
}

/** Parses an index's text; `indexPath` names it in errors (MODEL_FORMAT naming the field). */
export function parseSafetensorsIndex(text: string, indexPath: string): SafetensorsIndex {
  const index = parseModelJson(text, indexPath);
  if (!isPlainObject(index) || !isPlainObject(index["weight_map"])) {
    throw new InferenceError("MODEL_FORMAT", `${indexPath}: weight_map is missing or not an object`, {
      details: { file: indexPath, field: "weight_map" },
    });
  }
  const weightMap = new Map<string, string>();
  for (const [name, shard] of Object.entries(index["weight_map"])) {
    // Shards live in the model folder: refuse names that would leave it.
    if (!isFolderName(shard)) throw outsideFolder(indexPath, typeof shard === "string" ? shard : JSON.stringify(shard), name);
    weightMap.set(name, shard);
  }
  const metadata: Record<string, string> = {};
  if (isPlainObject(index["metadata"])) {
    for (const [key, value] of Object.entries(index["metadata"])) metadata[key] = typeof value === "string" ? value : JSON.stringify(value);
  }
  return { weightMap, metadata, shards: [...new Set(weightMap.values())] };
}

/**
 * Reads every shard the index names through `readShard` (in order) and joins their tensors; a
 * shard that is missing (MODEL_NOT_FOUND) is MODEL_FORMAT naming the index and the shard, a tensor
 * stored twice or not where the index says is MODEL_FORMAT too.
 */
export async function readSafetensorsShards(
  indexPath: string,
  index: SafetensorsIndex,
  readShard: (shard: string) => Promise<SafetensorsFile>,
): Promise<SafetensorsModel> {
  const tensors = new Map<string, SafetensorsTensor>();
  const metadata = { ...index.metadata };
  const files = new Map<string, string>();
  for (const shard of index.shards) {
    let file: SafetensorsFile;
    try {
      file = await readShard(shard);
    } catch (error) {
      if (!isInferenceError(error, "MODEL_NOT_FOUND")) throw error;
      throw missingShard(indexPath, shard, String(error.details["file"] ?? error.details["url"] ?? shard), error);
    }
    files.set(shard, file.source);
    Object.assign(metadata, file.metadata);
    for (const [name, tensor] of file.tensors) {
      if (tensors.has(name)) throw formatError(file.source, `"${name}"`, `also stored in ${tensors.get(name)!.file}`);
      tensors.set(name, tensor);
    }
  }
  for (const [name, shard] of index.weightMap) {
    if (tensors.get(name)?.file !== files.get(shard)) {
      throw formatError(indexPath, `weight_map["${name}"]`, `the tensor is not in shard "${shard}"`);
    }
  }
  return { tensors, metadata, files: [...files.values()] };
}
