// Finds the models under a folder: Hugging Face folders (config.json and safetensors shards) and
// GGUF files, each with its architecture, quantization, files and bytes (`infer ls`).
import { open, readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type ModelFormat, parseModelJson } from "@infer/core";
import { GGUF_FILE_TYPES, GGUF_PREAMBLE_BYTES, type GgufMetadata, hasGgufMagic } from "@infer/formats";
import { readGgufMetadataPrefix } from "@infer/formats/node";

export interface DiscoveredModel {
  /** Absolute path: the folder of a Hugging Face model, or the .gguf file. */
  path: string;
  format: Extract<ModelFormat, "gguf" | "safetensors">;
  /** config.json `model_type`, or GGUF `general.architecture`; "unknown" when absent. */
  modelType: string;
  /** Quantization: config.json `quantization`/`quantization_config` method or bits, or the GGUF file type name. */
  quantization?: string;
  /** Weight files: safetensors shards, or 1 for GGUF. */
  fileCount: number;
  /** Bytes of the weight files. */
  bytes: number;
}

/** Walks `dir` recursively and yields every model found; unreadable folders and bad JSON are skipped. */
export async function* discover(dir: string): AsyncGenerator<DiscoveredModel> {
  const root = resolve(dir);
  let entries;
  try {
    entries = await readdir(root, { withFileTypes: true });
  } catch {
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // Symbolic links to files count as files (the Hugging Face cache links its
  // snapshots to blobs); links to folders are not followed, so no cycles.
  const files = new Set<string>();
  for (const entry of entries) {
    if (entry.isFile() || (entry.isSymbolicLink() && (await isFileTarget(join(root, entry.name))))) files.add(entry.name);
  }
  const shards = [...files].filter((n) => n.endsWith(".safetensors"));
  if (files.has("config.json") && shards.length > 0) {
    const model = await describeHfFolder(root, shards);
    if (model) yield model;
  }
  for (const entry of entries) {
    const path = join(root, entry.name);
    if (files.has(entry.name) && entry.name.toLowerCase().endsWith(".gguf")) {
      const model = await describeGguf(path);
      if (model) yield model;
    } else if (entry.isDirectory() && !entry.name.startsWith(".") && entry.name !== "node_modules") {
      yield* discover(path);
    }
  }
}

async function isFileTarget(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false; // a dangling link
  }
}

/** Every model under `dir`, sorted by path. */
export async function discoverModels(dir: string): Promise<DiscoveredModel[]> {
  const found: DiscoveredModel[] = [];
  for await (const model of discover(dir)) found.push(model);
  return found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

async function describeHfFolder(folder: string, shards: string[]): Promise<DiscoveredModel | undefined> {
  let config: Record<string, unknown>;
  try {
    const parsed = parseModelJson(await readFile(join(folder, "config.json"), "utf8"), join(folder, "config.json"));
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
    config = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  let bytes = 0;
  for (const shard of shards) {
    try {
      bytes += (await stat(join(folder, shard))).size;
    } catch {
      return undefined;
    }
  }
  return {
    path: folder,
    format: "safetensors",
    modelType: typeof config.model_type === "string" ? config.model_type : "unknown",
    quantization: describeHfQuantization(config),
    fileCount: shards.length,
    bytes,
  };
}

function describeHfQuantization(config: Record<string, unknown>): string | undefined {
  const q = (config.quantization_config ?? config.quantization) as Record<string, unknown> | undefined;
  if (typeof q !== "object" || q === null) return undefined;
  if (typeof q.quant_method === "string") return typeof q.bits === "number" ? `${q.quant_method}-${q.bits}bit` : q.quant_method;
  if (typeof q.bits === "number") return `${q.bits}bit`;
  return "quantized";
}

/** Discovery reads at most this much of a GGUF file: it stays cheap however long the header. */
const GGUF_PREFIX_BYTES = 2 ** 20;

/**
 * A GGUF file's `general.architecture` and `general.file_type`, from a bounded
 * prefix: keys past it (behind a vocabulary of megabytes, say) are not found.
 * Any file with the magic and a whole preamble is listed; metadata that cannot
 * be read leaves its fields unknown.
 */
async function describeGguf(path: string): Promise<DiscoveredModel | undefined> {
  let size: number;
  try {
    size = (await stat(path)).size;
    const head = await readHead(path, GGUF_PREAMBLE_BYTES);
    if (head.length < GGUF_PREAMBLE_BYTES || !hasGgufMagic(head)) return undefined;
  } catch {
    return undefined;
  }
  const metadata = await readGgufMetadataPrefix(path, GGUF_PREFIX_BYTES).then(
    (read) => read.metadata,
    () => undefined,
  );
  const architecture = metadata && getScalar(metadata, "general.architecture");
  const fileType = metadata && getScalar(metadata, "general.file_type");
  return {
    path,
    format: "gguf",
    modelType: typeof architecture === "string" ? architecture : "unknown",
    quantization: typeof fileType === "number" ? (GGUF_FILE_TYPES[fileType]?.name ?? `type ${fileType}`) : undefined,
    fileCount: 1,
    bytes: size,
  };
}

/** A string or number value; undefined for other types (a wrongly typed key is as good as absent here). */
function getScalar(metadata: GgufMetadata, key: string): string | number | undefined {
  const value = metadata.get(key)?.value;
  return typeof value === "string" || typeof value === "number" ? value : undefined;
}

async function readHead(path: string, bytes: number): Promise<Uint8Array> {
  const handle = await open(path, "r");
  try {
    const head = new Uint8Array(bytes);
    const { bytesRead } = await handle.read(head, 0, bytes, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
