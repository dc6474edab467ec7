import { open, stat } from "node:fs/promises";
import { InferenceError } from "@infer/core";

/** "GGUF" as the first four bytes of every GGUF file. */
const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46];
/** Magic + version (u32) + tensor count (u64) + metadata count (u64). */
const GGUF_MIN_HEADER_BYTES = 24;
const SUPPORTED_VERSIONS = new Set([2, 3]);
/** A tensor info holds at least: name length (u64), n_dims (u32), type (u32), offset (u64). */
const MIN_TENSOR_INFO_BYTES = 24n;
/** A metadata entry holds at least: key length (u64), value type (u32), a one-byte value. */
const MIN_METADATA_ENTRY_BYTES = 13n;

/** True when the file starts with the GGUF magic; false for anything else, including missing files. */
export async function hasGgufMagic(path: string): Promise<boolean> {
  try {
    const file = await open(path, "r");
    try {
      const head = Buffer.alloc(4);
      const { bytesRead } = await file.read(head, 0, 4, 0);
      return bytesRead === 4 && GGUF_MAGIC.every((byte, i) => head[i] === byte);
    } finally {
      await file.close();
    }
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
  const head = Buffer.alloc(GGUF_MIN_HEADER_BYTES);
  const file = await open(path, "r");
  let bytesRead: number;
  try {
    ({ bytesRead } = await file.read(head, 0, head.length, 0));
  } finally {
    await file.close();
  }
  if (bytesRead < 4 || !GGUF_MAGIC.every((byte, i) => head[i] === byte)) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' is not a GGUF file (its first bytes are not "GGUF")`, {
      details: { path },
    });
  }
  if (bytesRead < GGUF_MIN_HEADER_BYTES) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' is truncated: ${size} bytes, shorter than a GGUF header`, {
      details: { path, size },
    });
  }
  const version = head.readUInt32LE(4);
  if (!SUPPORTED_VERSIONS.has(version)) {
    throw new InferenceError("MODEL_FORMAT", `${what} '${path}' has GGUF version ${version}; llama.cpp reads versions 2 and 3`, {
      details: { path, version },
    });
  }
  // Counts are checked against the file size before any parser sizes arrays from them.
  const tensorCount = head.readBigUInt64LE(8);
  const metadataCount = head.readBigUInt64LE(16);
  const smallestEntries = tensorCount * MIN_TENSOR_INFO_BYTES + metadataCount * MIN_METADATA_ENTRY_BYTES;
  if (smallestEntries > BigInt(size - GGUF_MIN_HEADER_BYTES)) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `${what} '${path}' is corrupt: its header declares ${tensorCount} tensors and ${metadataCount} metadata entries, ` +
        `more than its ${size} bytes can hold`,
      { details: { path, tensorCount: Number(tensorCount), metadataCount: Number(metadataCount), size } },
    );
  }
}

export interface QuantDescription {
  /** Bits per weight of the dominant weight type. */
  bits: number;
  /** Quantization block size; 0 for plain floating point. */
  group: number;
}

/** llama.cpp's `llama_ftype` (GGUF key `general.file_type`): what the file's weights mostly are. */
const FILE_TYPES: Record<number, QuantDescription> = {
  0: { bits: 32, group: 0 }, // ALL_F32
  1: { bits: 16, group: 0 }, // MOSTLY_F16
  2: { bits: 4, group: 32 }, // Q4_0
  3: { bits: 4, group: 32 }, // Q4_1
  7: { bits: 8, group: 32 }, // Q8_0
  8: { bits: 5, group: 32 }, // Q5_0
  9: { bits: 5, group: 32 }, // Q5_1
  10: { bits: 2, group: 256 }, // Q2_K
  11: { bits: 3, group: 256 }, // Q3_K_S
  12: { bits: 3, group: 256 }, // Q3_K_M
  13: { bits: 3, group: 256 }, // Q3_K_L
  14: { bits: 4, group: 256 }, // Q4_K_S
  15: { bits: 4, group: 256 }, // Q4_K_M
  16: { bits: 5, group: 256 }, // Q5_K_S
  17: { bits: 5, group: 256 }, // Q5_K_M
  18: { bits: 6, group: 256 }, // Q6_K
  19: { bits: 2, group: 256 }, // IQ2_XXS
  20: { bits: 2, group: 256 }, // IQ2_XS
  21: { bits: 2, group: 256 }, // Q2_K_S
  22: { bits: 3, group: 256 }, // IQ3_XS
  23: { bits: 3, group: 256 }, // IQ3_XXS
  24: { bits: 1, group: 256 }, // IQ1_S
  25: { bits: 4, group: 32 }, // IQ4_NL
  26: { bits: 3, group: 256 }, // IQ3_S
  27: { bits: 3, group: 256 }, // IQ3_M
  28: { bits: 2, group: 256 }, // IQ2_S
  29: { bits: 2, group: 256 }, // IQ2_M
  30: { bits: 4, group: 256 }, // IQ4_XS
  31: { bits: 1, group: 256 }, // IQ1_M
  32: { bits: 16, group: 0 }, // MOSTLY_BF16
  36: { bits: 1, group: 256 }, // TQ1_0
  37: { bits: 2, group: 256 }, // TQ2_0
  38: { bits: 4, group: 32 }, // MXFP4_MOE
};

/** ggml tensor types (GGUF tensor infos), for files without `general.file_type`. */
const TENSOR_TYPES: Record<number, QuantDescription> = {
  0: { bits: 32, group: 0 }, // F32
  1: { bits: 16, group: 0 }, // F16
  2: { bits: 4, group: 32 }, // Q4_0
  3: { bits: 4, group: 32 }, // Q4_1
  6: { bits: 5, group: 32 }, // Q5_0
  7: { bits: 5, group: 32 }, // Q5_1
  8: { bits: 8, group: 32 }, // Q8_0
  9: { bits: 8, group: 32 }, // Q8_1
  10: { bits: 2, group: 256 }, // Q2_K
  11: { bits: 3, group: 256 }, // Q3_K
  12: { bits: 4, group: 256 }, // Q4_K
  13: { bits: 5, group: 256 }, // Q5_K
  14: { bits: 6, group: 256 }, // Q6_K
  15: { bits: 8, group: 256 }, // Q8_K
  30: { bits: 16, group: 0 }, // BF16
};

export interface TensorSummary {
  ggmlType: number;
  dimensions: readonly (number | bigint)[];
}

/**
 * The quantization of a model: from `general.file_type` when the file states
 * it, otherwise from the tensor type holding the most weights.
 */
export function describeQuantization(fileType: unknown, tensors: readonly TensorSummary[] | undefined): QuantDescription {
  if (typeof fileType === "number" && FILE_TYPES[fileType]) return FILE_TYPES[fileType]!;
  const weightsByType = new Map<number, number>();
  for (const tensor of tensors ?? []) {
    weightsByType.set(tensor.ggmlType, (weightsByType.get(tensor.ggmlType) ?? 0) + elementCount(tensor));
  }
  let dominant: number | undefined;
  for (const [type, count] of weightsByType) {
    if (dominant === undefined || count > weightsByType.get(dominant)!) dominant = type;
  }
  return (dominant !== undefined && TENSOR_TYPES[dominant]) || { bits: 0, group: 0 };
}

export function elementCount(tensor: TensorSummary): number {
  return tensor.dimensions.reduce<number>((product, dim) => product * Number(dim), 1);
}

/** GGUF metadata value types (the u32 before each value). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

const FIXED_VALUE_BYTES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
/** Metadata scanned for types is read from at most this many leading bytes (adapters keep a few hundred). */
const METADATA_SCAN_BYTES = 8 * 2 ** 20;

/**
 * The value type of each metadata key in the file's first bytes. Some of
 * llama.cpp's readers (LoRA adapters) read values with asserting accessors
 * that abort the process on a type mismatch, so the types are checked here first.
 */
export async function readMetadataTypes(path: string): Promise<Map<string, number>> {
  const file = await open(path, "r");
  let bytes: Buffer;
  try {
    const size = (await file.stat()).size;
    bytes = Buffer.alloc(Math.min(size, METADATA_SCAN_BYTES));
    await file.read(bytes, 0, bytes.length, 0);
  } finally {
    await file.close();
  }
  const types = new Map<string, number>();
  let at = 24;
  const metadataCount = bytes.length >= 24 ? bytes.readBigUInt64LE(16) : 0n;
  const need = (count: number | bigint) => {
    if (BigInt(at) + BigInt(count) > BigInt(bytes.length)) throw new RangeError("past the scanned bytes");
  };
  const skipString = () => {
    need(8);
    const length = bytes.readBigUInt64LE(at);
    need(8n + length);
    at += 8 + Number(length);
  };
  const skipValue = (type: number, depth: number): void => {
    const fixed = FIXED_VALUE_BYTES[type];
    if (fixed !== undefined) {
      need(fixed);
      at += fixed;
    } else if (type === GgufValueType.STRING) {
      skipString();
    } else if (type === GgufValueType.ARRAY && depth < 4) {
      need(12);
      const itemType = bytes.readUInt32LE(at);
      const count = bytes.readBigUInt64LE(at + 4);
      at += 12;
      const itemBytes = FIXED_VALUE_BYTES[itemType];
      if (itemBytes !== undefined) {
        need(count * BigInt(itemBytes));
        at += Number(count) * itemBytes;
      } else {
        for (let i = 0n; i < count; i++) skipValue(itemType, depth + 1);
      }
    } else {
      throw new RangeError(`unknown value type ${type}`);
    }
  };
  try {
    for (let i = 0n; i < metadataCount; i++) {
      need(8);
      const keyLength = Number(bytes.readBigUInt64LE(at));
      need(8 + keyLength + 4);
      const key = bytes.toString("utf8", at + 8, at + 8 + keyLength);
      const type = bytes.readUInt32LE(at + 8 + keyLength);
      at += 8 + keyLength + 4;
      types.set(key, type);
      skipValue(type, 0);
    }
  } catch {
    // Truncated or odd metadata: report what was read; llama.cpp's own parser rejects the rest.
  }
  return types;
}

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
  const types = await readMetadataTypes(path);
  const names = Object.fromEntries(Object.entries(GgufValueType).map(([name, id]) => [id, name]));
  for (const [key, expected] of Object.entries(ADAPTER_KEY_TYPES)) {
    const actual = types.get(key);
    if (actual !== undefined && actual !== expected) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `LoRA adapter '${path}': metadata key ${key} is ${names[actual] ?? `type ${actual}`}, expected ${names[expected]}`,
        { details: { path, field: key } },
      );
    }
  }
  if (types.get("general.type") === undefined || types.get("adapter.type") === undefined) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `'${path}' is not a GGUF LoRA adapter (it lacks general.type = "adapter" and adapter.type = "lora")`,
      { details: { path } },
    );
  }
}
