import { open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { type Host, setHost } from "../registry.js";
import type { ModelFormat } from "../types.js";

export { checkpointDirectory, decodeCheckpoint, encodeCheckpoint } from "./checkpoint-file.js";
export { type JsonlFileRecorder, jsonlFileRecorder } from "./jsonl-file.js";

/** Identifies a model path by its content: GGUF magic, HF folder layout, llama2.c checkpoint. */
export async function detectFormat(path: string): Promise<ModelFormat> {
  try {
    const info = await stat(path);
    if (info.isDirectory()) {
      const names = await readdir(path);
      if (names.includes("config.json") && names.some((n) => n.endsWith(".safetensors"))) return "safetensors";
      return "unknown";
    }
    // A pipe, device or socket is no model file (and opening a named pipe waits for a writer).
    if (!info.isFile()) return "unknown";
    const handle = await open(path, "r");
    try {
      const magic = Buffer.alloc(4);
      await handle.read(magic, 0, 4, 0);
      if (magic.toString("latin1") === "GGUF") return "gguf";
    } finally {
      await handle.close();
    }
    if (path.endsWith(".safetensors")) return "safetensors";
    if (path.endsWith(".bin")) return "llama2c";
    return "unknown";
  } catch {
    return "unknown";
  }
}

/** True when `path` is a GGUF file (by magic). */
export async function isGgufFile(path: string): Promise<boolean> {
  return (await detectFormat(path)) === "gguf";
}

/** True when `path` is a Hugging Face folder: config.json and at least one .safetensors file. */
export async function isHfFolder(path: string): Promise<boolean> {
  try {
    await stat(join(path, "config.json"));
  } catch {
    return false;
  }
  return (await detectFormat(path)) === "safetensors";
}

export const nodeHost: Host = {
  async exists(path) {
    try {
      await stat(path);
      return true;
    } catch {
      return false;
    }
  },
  detectFormat,
};

setHost(nodeHost);
