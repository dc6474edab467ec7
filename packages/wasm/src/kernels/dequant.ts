/**
 * Reading one row of a WeightMatrix as float32. F32 / F16 / BF16 are read
 * directly; block-quantized types go through the GGUF type table's dequantizer.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, type WeightMatrix } from "./types.js";
import { bf16ToF32, f16Table65536 } from "../formats/half.js";
import { dequantizeRow, rowBytes } from "../formats/ggml-types.js";

/** A float32 view of an F32 matrix's bytes (they must be 4-byte aligned; the loader ensures it). */
export function float32View(w: WeightMatrix): Float32Array {
  if (w.data.byteOffset % 4 !== 0) {
    throw new InferenceError("INTERNAL", "F32 weight data is not 4-byte aligned");
  }
  return new Float32Array(w.data.buffer, w.data.byteOffset, w.rows * w.cols);
}

/** Writes row `row` of `w` as float32 into out[outOffset .. outOffset + w.cols). */
export function dequantizeMatrixRow(w: WeightMatrix, row: number, out: Float32Array, outOffset = 0): void {
  const cols = w.cols;
  switch (w.type) {
    case GgmlType.F32: {
      out.set(float32View(w).subarray(row * cols, (row + 1) * cols), outOffset);
      return;
    }
    case GgmlType.F16: {
      const table = f16Table65536();
      const bytes = w.data;
      let at = row * cols * 2;
      for (let c = 0; c < cols; c++, at += 2) out[outOffset + c] = table[bytes[at]! | (bytes[at + 1]! << 8)]!;
      return;
    }
    case GgmlType.BF16: {
      const bytes = w.data;
      let at = row * cols * 2;
      for (let c = 0; c < cols; c++, at += 2) out[outOffset + c] = bf16ToF32(bytes[at]! | (bytes[at + 1]! << 8));
      return;
    }
    default:
      dequantizeRow(w.type, w.data, row * rowBytes(w.type, cols), cols, out, outOffset);
  }
}
