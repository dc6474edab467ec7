import { open, readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { ModelFormat } from "../types.js";

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
    const parsed: unknown = JSON.parse(await readFile(join(folder, "config.json"), "utf8"));
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

/** GGUF file types (general.file_type), as llama.cpp names them. */
export const GGUF_FILE_TYPES: Record<number, string> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
  12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
  19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
  26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
  36: "TQ1_0", 37: "TQ2_0",
};

/**
 * Reads just enough of a GGUF header to find `general.architecture` and
 * `general.file_type`. Discovery must stay cheap and never trust sizes: it
 * reads a bounded prefix and gives up on anything odd.
 */
async function describeGguf(path: string): Promise<DiscoveredModel | undefined> {
  let handle;
  try {
    handle = await open(path, "r");
    const size = (await handle.stat()).size;
    const head = Buffer.alloc(Math.min(size, 1 << 20));
    await handle.read(head, 0, head.length, 0);
    if (head.length < 24 || head.toString("latin1", 0, 4) !== "GGUF") return undefined;
    const meta = readGgufScalars(head, ["general.architecture", "general.file_type"]);
    const fileType = meta.get("general.file_type");
    return {
      path,
      format: "gguf",
      modelType: typeof meta.get("general.architecture") === "string" ? (meta.get("general.architecture") as string) : "unknown",
      quantization: typeof fileType === "number" ? (GGUF_FILE_TYPES[fileType] ?? `type ${fileType}`) : undefined,
      fileCount: 1,
      bytes: size,
    };
  } catch {
    return undefined;
  } finally {
    await handle?.close();
  }
}

/**
 * Scans GGUF metadata in `buf` for the wanted string/integer keys. Keys past
 * the bounded prefix (e.g. behind a large vocabulary array) are not found;
 * whatever was found before that point is kept.
 */
function readGgufScalars(buf: Buffer, wanted: string[]): Map<string, string | number> {
  const found = new Map<string, string | number>();
  const wide = buf.readUInt32LE(4) >= 2; // v1 used 32-bit counts and lengths
  let at = 8;
  const readCount = () => {
    const n = wide ? Number(buf.readBigUInt64LE(at)) : buf.readUInt32LE(at);
    at += wide ? 8 : 4;
    return n;
  };
  const readString = () => {
    const len = readCount();
    if (at + len > buf.length) throw new RangeError("string beyond prefix");
    const s = buf.toString("utf8", at, at + len);
    at += len;
    return s;
  };
  const scalarSize: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  /** Reads one key/value pair; false when the layout is not understood. */
  const readPair = (): boolean => {
    const key = readString();
    const type = buf.readUInt32LE(at);
    at += 4;
    if (type === 8) {
      const value = readString();
      if (wanted.includes(key)) found.set(key, value);
    } else if (type === 9) {
      const itemType = buf.readUInt32LE(at);
      at += 4;
      const n = readCount();
      if (itemType === 8) for (let j = 0; j < n; j++) readString();
      else if (scalarSize[itemType] !== undefined) at += n * scalarSize[itemType]!;
      else return false;
    } else if (scalarSize[type] !== undefined) {
      if (wanted.includes(key) && (type === 4 || type === 5)) {
        found.set(key, type === 4 ? buf.readUInt32LE(at) : buf.readInt32LE(at));
      }
      at += scalarSize[type]!;
    } else {
      return false;
    }
    return at <= buf.length;
  };
  try {
    readCount(); // tensor count
    const kvCount = readCount();
    for (let i = 0; i < kvCount && found.size < wanted.length; i++) if (!readPair()) break;
  } catch {
    // Ran past the prefix (RangeError from a read): keep what was found.
  }
  return found;
}
