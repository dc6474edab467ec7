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
    case GgmlType.Q4_0_X4: {
      const plain = interleavedRowAsQ4_0(w, row);
      dequantizeRow(GgmlType.Q4_0, plain, 0, cols, out, outOffset);
      return;
    }
    default:
      dequantizeRow(w.type, w.data, row * rowBytes(w.type, cols), cols, out, outOffset);
  }
}

/** Bytes per block of Q4_0 (f16 scale, 16 bytes of nibbles) and of a Q4_0_X4 group's block (four of each). */
const Q4_0_BLOCK_BYTES = 18;
const GROUP_BLOCK_BYTES = 72;

/**
 * Row `row` of a Q4_0_X4 matrix gathered back into plain Q4_0 blocks. Rows in
 * groups of four: per block, the four rows' f16 scales (row k's at 2k), then
 * their 16 bytes of nibbles (row k's at 8 + 16k); the last rows % 4 rows are
 * plain Q4_0 after the groups (assembly/interleave.ts).
 */
export function interleavedRowAsQ4_0(w: WeightMatrix, row: number): Uint8Array {
  const blocks = w.cols / 32;
  const rowBytes = blocks * Q4_0_BLOCK_BYTES;
  if (row >= (w.rows & ~3)) return w.data.subarray(row * rowBytes, (row + 1) * rowBytes);
  const plain = new Uint8Array(rowBytes);
  const group = (row & ~3) * rowBytes;
  const lane = row & 3;
  for (let b = 0; b < blocks; b++) {
    const at = group + b * GROUP_BLOCK_BYTES;
    plain[b * Q4_0_BLOCK_BYTES] = w.data[at + 2 * lane]!;
    plain[b * Q4_0_BLOCK_BYTES + 1] = w.data[at + 2 * lane + 1]!;
    plain.set(w.data.subarray(at + 8 + 16 * lane, at + 24 + 16 * lane), b * Q4_0_BLOCK_BYTES + 2);
  }
  return plain;
}
