/** safetensors writer for float tensors; the layout safetensors.ts reads. */
import { InferenceError } from "@infer/core";
import { f32ToBf16, f32ToF16 } from "./half.js";

export interface SafetensorsTensorSpec {
  name: string;
  /** Stored encoding; `data` is converted to it (F16/BF16 round to nearest even). */
  dtype: "F32" | "F16" | "BF16";
  /** Row-major, outermost first. */
  shape: number[];
  data: Float32Array;
}

function invalid(field: string, problem: string): InferenceError {
  return new InferenceError("INVALID_OPTION", `writeSafetensors: ${field}: ${problem}`, { details: { field } });
}

/** Serializes tensors (in the given order) and optional string metadata. */
export function writeSafetensors(tensors: SafetensorsTensorSpec[], metadata?: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (metadata !== undefined) {
    for (const [key, value] of Object.entries(metadata)) {
      if (typeof value !== "string") throw invalid(`metadata["${key}"]`, "values must be strings");
    }
    header["__metadata__"] = metadata;
  }
  const encoded: Uint8Array[] = [];
  let offset = 0;
  for (const tensor of tensors) {
    const field = `tensor "${tensor.name}"`;
    if (tensor.name === "__metadata__" || tensor.name in header) throw invalid(field, "the name is reserved or appears twice");
    if (!tensor.shape.every((size) => Number.isSafeInteger(size) && size >= 0)) {
      throw invalid(`${field} shape`, `[${tensor.shape}] is not a list of non-negative integers`);
    }
    const elements = tensor.shape.reduce((a, b) => a * b, 1);
    if (elements !== tensor.data.length) throw invalid(`${field} data`, `has ${tensor.data.length} values, shape [${tensor.shape}] needs ${elements}`);
    const bytes = encodeFloats(tensor.dtype, tensor.data, field);
    header[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape, data_offsets: [offset, offset + bytes.length] };
    encoded.push(bytes);
    offset += bytes.length;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  // The format pads the header with spaces so the data starts 8-byte aligned.
  const headerLength = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLength);
  let at = 8 + headerLength;
  for (const bytes of encoded) {
    out.set(bytes, at);
    at += bytes.length;
  }
  return out;
}

function encodeFloats(dtype: string, data: Float32Array, field: string): Uint8Array {
  switch (dtype) {
    case "F32": {
      const bytes = new Uint8Array(data.length * 4);
      const view = new DataView(bytes.buffer);
      data.forEach((value, i) => view.setFloat32(4 * i, value, true));
      return bytes;
    }
    case "F16":
    case "BF16": {
      const encode = dtype === "F16" ? f32ToF16 : f32ToBf16;
      const bytes = new Uint8Array(data.length * 2);
      const view = new DataView(bytes.buffer);
      data.forEach((value, i) => view.setUint16(2 * i, encode(value), true));
      return bytes;
    }
  }
  throw new InferenceError("UNSUPPORTED_DTYPE", `writeSafetensors: ${field} dtype: ${dtype} is not one of F32, F16, BF16`, {
    details: { field, dtype },
  });
}
