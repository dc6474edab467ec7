/**
 * safetensors reader. Layout: u64 little-endian header length N | N bytes of
 * JSON header | tensor data. The header maps each tensor name to
 * { dtype, shape (row-major, outermost first), data_offsets: [begin, end) }
 * relative to the start of the data, plus an optional "__metadata__" object
 * of string values.
 */
import { InferenceError, parseModelJson } from "@infer/core";
import { bf16ToF32, f16Table65536 } from "./half.js";
import { decodeUtf8 } from "./utf8.js";

/** The dtypes the format defines (fixed-size ones; sub-byte formats are not read). */
export type SafetensorsDtype =
  | "BOOL"
  | "U8"
  | "I8"
  | "F8_E5M2"
  | "F8_E4M3"
  | "I16"
  | "U16"
  | "F16"
  | "BF16"
  | "I32"
  | "U32"
  | "F32"
  | "F64"
  | "I64"
  | "U64";

/** Bytes per element of each dtype. */
export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<SafetensorsDtype, number>> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
};

/** A header bigger than this is taken as corruption rather than allocated. */
export const MAX_SAFETENSORS_HEADER_BYTES = 100_000_000;

export interface SafetensorsTensor {
  name: string;
  /** As written in the header: "F32", "F16", "BF16", "I32", ... */
  dtype: SafetensorsDtype;
  /** Row-major, outermost first. */
  shape: number[];
  /** The tensor's bytes: a view into the file's bytes. */
  data: Uint8Array;
  /** The file the tensor was read from. */
  file: string;
}

export interface SafetensorsFile {
  source: string;
  metadata: Record<string, string>;
  tensors: Map<string, SafetensorsTensor>;
  bytes: Uint8Array;
  /** Absolute offset of the data section (8 + header length). */
  dataOffset: number;
}

export interface SafetensorsModel {
  tensors: Map<string, SafetensorsTensor>;
  /** The shards' __metadata__ merged, with the index's "metadata" (stringified) under them. */
  metadata: Record<string, string>;
  /** The files read, in order. */
  files: string[];
}

/** MODEL_FORMAT naming the safetensors file and field. */
export function formatError(source: string, field: string, problem: string): InferenceError {
  return new InferenceError("MODEL_FORMAT", `${source}: safetensors ${field}: ${problem}`, { details: { file: source, field } });
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function parseSafetensors(bytes: Uint8Array, source = "<buffer>"): SafetensorsFile {
  if (bytes.length < 8) throw formatError(source, "header length", `the file has ${bytes.length} bytes, fewer than the 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const declared = view.getBigUint64(0, true);
  if (declared > BigInt(MAX_SAFETENSORS_HEADER_BYTES)) {
    throw formatError(source, "header length", `${declared} bytes is beyond the ${MAX_SAFETENSORS_HEADER_BYTES}-byte limit`);
  }
  const headerLength = Number(declared);
  if (8 + headerLength > bytes.length) {
    throw formatError(source, "header length", `${headerLength} bytes runs past the end of the ${bytes.length}-byte file`);
  }
  let text: string;
  try {
    text = decodeUtf8(new TextDecoder("utf-8", { fatal: true }), bytes.subarray(8, 8 + headerLength));
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${source}: safetensors header: not valid UTF-8`, {
      cause: error,
      details: { file: source, field: "header" },
    });
  }
  const header = parseModelJson(text, `${source}: safetensors header`);
  if (!isPlainObject(header)) throw formatError(source, "header", "is not a JSON object");

  const dataOffset = 8 + headerLength;
  const dataLength = bytes.length - dataOffset;
  const metadata = readMetadata(header["__metadata__"], source);
  const tensors = new Map<string, SafetensorsTensor>();
  const ranges: { name: string; begin: number; end: number }[] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const { dtype, shape, begin, end } = readEntry(name, entry, dataLength, source);
    tensors.set(name, { name, dtype, shape, data: bytes.subarray(dataOffset + begin, dataOffset + end), file: source });
    ranges.push({ name, begin, end });
  }
  ranges.sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++) {
    const previous = ranges[i - 1]!;
    const current = ranges[i]!;
    if (current.begin < previous.end) {
      throw formatError(
        source,
        `"${current.name}" data_offsets`,
        `[${current.begin}, ${current.end}) overlaps "${previous.name}" [${previous.begin}, ${previous.end})`,
      );
    }
  }
  return { source, metadata, tensors, bytes, dataOffset };
}

function readMetadata(value: unknown, source: string): Record<string, string> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw formatError(source, "__metadata__", "is not an object");
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== "string") throw formatError(source, `__metadata__["${key}"]`, "is not a string");
  }
  return { ...(value as Record<string, string>) };
}

function readEntry(
  name: string,
  entry: unknown,
  dataLength: number,
  source: string,
): { dtype: SafetensorsDtype; shape: number[]; begin: number; end: number } {
  const field = `"${name}"`;
  if (!isPlainObject(entry)) throw formatError(source, field, "is not an object");
  const { dtype, shape, data_offsets: offsets } = entry;
  if (typeof dtype !== "string") throw formatError(source, `${field} dtype`, "is missing or not a string");
  if (!Object.hasOwn(SAFETENSORS_DTYPE_BYTES, dtype)) {
    throw new InferenceError("UNSUPPORTED_DTYPE", `${source}: safetensors ${field} dtype: unknown dtype "${dtype}"`, {
      details: { file: source, field: `${name}.dtype`, dtype },
    });
  }
  const elementBytes = SAFETENSORS_DTYPE_BYTES[dtype as SafetensorsDtype];
  if (!Array.isArray(shape) || !shape.every((size) => Number.isSafeInteger(size) && size >= 0)) {
    throw formatError(source, `${field} shape`, `${JSON.stringify(shape)} is not a list of non-negative integers`);
  }
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
    throw formatError(source, `${field} data_offsets`, `${JSON.stringify(offsets)} is not [begin, end]`);
  }
  const [begin, end] = offsets as [number, number];
  if (begin > end || end > dataLength) {
    throw formatError(source, `${field} data_offsets`, `[${begin}, ${end}) is outside the ${dataLength} bytes of tensor data`);
  }
  const elements = (shape as number[]).reduce((a, b) => a * b, 1);
  if (elements * elementBytes !== end - begin) {
    throw formatError(
      source,
      `${field} data_offsets`,
      `${end - begin} bytes do not hold ${dtype} [${shape.join(", ")}] (${elements * elementBytes} bytes)`,
    );
  }
  return { dtype: dtype as SafetensorsDtype, shape: shape as number[], begin, end };
}

/** Decodes an F32, F16 or BF16 tensor to a fresh Float32Array. */
export function toFloat32(tensor: SafetensorsTensor): Float32Array {
  const { data } = tensor;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  switch (tensor.dtype) {
    case "F32": {
      const out = new Float32Array(data.length / 4);
      for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
      return out;
    }
    case "F16": {
      const table = f16Table65536();
      const out = new Float32Array(data.length / 2);
      for (let i = 0; i < out.length; i++) out[i] = table[view.getUint16(2 * i, true)]!;
      return out;
    }
    case "BF16": {
      const out = new Float32Array(data.length / 2);
      for (let i = 0; i < out.length; i++) out[i] = bf16ToF32(view.getUint16(2 * i, true));
      return out;
    }
  }
  throw new InferenceError(
    "UNSUPPORTED_DTYPE",
    `${tensor.file}: tensor "${tensor.name}" has dtype ${tensor.dtype}; only F32, F16 and BF16 convert to float32`,
    { details: { file: tensor.file, field: tensor.name, dtype: tensor.dtype } },
  );
}
