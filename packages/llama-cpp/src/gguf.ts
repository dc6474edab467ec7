// The checks llama.cpp needs before it sees a file, worded for this backend; the format's facts
// (magic, versions, sizes, value types) and its parser are @infer/formats'.
import { open, stat } from "node:fs/promises";
import { InferenceError } from "@infer/core";
import {
  GGUF_MIN_METADATA_ENTRY_BYTES,
  GGUF_MIN_TENSOR_INFO_BYTES,
  GGUF_PREAMBLE_BYTES,
  GGUF_VERSIONS,
  GgufValueType,
  hasGgufMagic as bytesHaveGgufMagic,
  valueTypeName,
} from "@infer/formats";
import { readGgufMetadataPrefix, withOpenFile } from "@infer/formats/node";

/** True when the file starts with the GGUF magic; false for anything else, including missing files. */
export async function hasGgufMagic(path: string): Promise<boolean> {
  try {
    // withOpenFile refuses a pipe or device (without waiting on a named pipe for a writer).
    return await withOpenFile(path, "GGUF", async (file) => {
      const head = Buffer.alloc(4);
      const { bytesRead } = await file.read(head, 0, 4, 0);
      return bytesHaveGgufMagic(head.subarray(0, bytesRead));
    });
  } catch {
    return false;
  }
}

/**
 * Checks, before llama.cpp sees the file, that it exists, is a regular file and
 * carries a GGUF header of a version llama.cpp reads: a missing file is
 * MODEL_NOT_FOUND, anything else wrong MODEL_FORMAT naming the file.
 */
export async function assertGgufFile(path: string, what = "model"): Promise<void> {
  let size: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) {
      throw new InferenceError("MODEL_FORMAT", `${what} '${path}' is not a file (a GGUF file is expected)`, {
        details: { path },
      });
    }
    size = info.size;
  } catch (error) {
    if (error instanceof InferenceError) throw error;
    throw new InferenceError("MODEL_NOT_FOUND", `no ${what} at '${path}'`, { cause: error, details: { path } });
  }
  const head = Buffer.alloc(GGUF_PREAMBLE_BYTES);
  const file = await open(path, "r");
  let bytesRead: number;
  try {
    ({ bytesRead } = await file.read(head, 0, head.length, 0));
  } finally {
    await file.close();
  }
  if (!bytesHaveGgufMagic(head.subarray(0, bytesRead))) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' is not a GGUF file (its first bytes are not "GGUF")`, {
      details: { path },
    });
  }
  if (bytesRead < GGUF_PREAMBLE_BYTES) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' is truncated: ${size} bytes, shorter than a GGUF header`, {
      details: { path, size },
    });
  }
  const version = head.readUInt32LE(4);
  if (!GGUF_VERSIONS.includes(version)) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' has GGUF version ${version}; llama.cpp reads versions 2 and 3`, {
      details: { path, version },
    });
  }
  // Counts are checked against the file size before any parser sizes arrays from them.
  const tensorCount = head.readBigUInt64LE(8);
  const metadataCount = head.readBigUInt64LE(16);
  const smallestEntries = tensorCount * BigInt(GGUF_MIN_TENSOR_INFO_BYTES) + metadataCount * BigInt(GGUF_MIN_METADATA_ENTRY_BYTES);
  if (smallestEntries > BigInt(size - GGUF_PREAMBLE_BYTES)) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `${what} '${path}' is corrupt: its header declares ${tensorCount} tensors and ${metadataCount} metadata entries, ` +
        `more than its ${size} bytes can hold`,
      { details: { path, tensorCount: Number(tensorCount), metadataCount: Number(metadataCount), size } },
    );
  }
}

/** Metadata scanned for types is read from at most this many leading bytes (adapters keep a few hundred). */
const METADATA_SCAN_BYTES = 8 * 2 ** 20;

/** The metadata types llama.cpp's LoRA loader reads without checking. */
const ADAPTER_KEY_TYPES: Record<string, number> = {
  "general.architecture": GgufValueType.STRING,
  "general.type": GgufValueType.STRING,
  "adapter.type": GgufValueType.STRING,
  "adapter.lora.alpha": GgufValueType.FLOAT32,
  "adapter.lora.task_name": GgufValueType.STRING,
  "adapter.lora.prompt_prefix": GgufValueType.STRING,
  "adapter.alora.invocation_tokens": GgufValueType.ARRAY,
};

/** Rejects a LoRA adapter whose metadata types would make llama.cpp abort. */
export async function assertAdapterMetadata(path: string): Promise<void> {
  // Keys past the scanned bytes are left to llama.cpp's own parser, which rejects what it cannot read.
  const { metadata } = await readGgufMetadataPrefix(path, METADATA_SCAN_BYTES);
  for (const [key, expected] of Object.entries(ADAPTER_KEY_TYPES)) {
    const actual = metadata.get(key)?.type;
    if (actual !== undefined && actual !== expected) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `LoRA adapter '${path}': metadata key ${key} is ${valueTypeName(actual)}, expected ${valueTypeName(expected)}`,
        { details: { path, field: key } },
      );
    }
  }
  if (!metadata.has("general.type") || !metadata.has("adapter.type")) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `'${path}' is not a GGUF LoRA adapter (it lacks general.type = "adapter" and adapter.type = "lora")`,
      { details: { path } },
    );
  }
}
