/**
 * Reading rows of a WeightMatrix as float32: one row, or the embedding rows of
 * a batch's tokens. F32 / F16 / BF16 are read directly; block-quantized types
 * go through the GGUF type table's dequantizer.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, bf16ToF32, f16Table65536, dequantizeRow, rowBytes } from "@infer/formats";
import { KernelLayout, plainTypeOf, type WeightMatrix } from "./types.js";

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
    case KernelLayout.Q4_0_X4:
    case KernelLayout.Q8_0_X4:
    case KernelLayout.Q5_0_X4:
    case KernelLayout.Q5_1_X4: {
      dequantizeRow(plainTypeOf(w.type), interleavedRowAsPlain(w, row), 0, cols, out, outOffset);
      return;
    }
    default:
      dequantizeRow(w.type, w.data, row * rowBytes(w.type, cols), cols, out, outOffset);
  }
}

/**
 * Row `row` of a Q4_0_X4, Q8_0_X4, Q5_0_X4 or Q5_1_X4 matrix gathered back into plain
 * Q4_0 / Q8_0 / Q5_0 / Q5_1 blocks (f16 scale, Q5_1's f16 minimum, then P = 16, 32 or 20
 * payload bytes). Rows in groups of four: per block, the four rows' f16 scales (row k's
 * at 2k), Q5_1's four f16 minimums (row k's at 8 + 2k), then their payloads (row k's at
 * H + kP, H = 8, or 16 with the minimums); the last rows % 4 rows are plain after the
 * groups (assembly/interleave.ts). Q8_0's payload is its bytes as
 * stored; Q5_0's its 32 fifth bits reordered (element e < 16 at bit
 * 8 (e % 4) + e / 4, element 16 + e at 8 (e % 4) + 4 + e / 4), then its 16
 * nibble bytes as stored; a Q4_0_X4 payload is eight u16 lanes, lane j holding
 * q XOR 8 of elements j, 8 + j, 16 + j, 24 + j in bits 0-3, 4-7, 8-11, 12-15.
 */
export function interleavedRowAsPlain(w: WeightMatrix, row: number): Uint8Array {
  const payload = w.type === KernelLayout.Q4_0_X4 ? 16 : w.type === KernelLayout.Q8_0_X4 ? 32 : 20;
  const minimums = w.type === KernelLayout.Q5_1_X4;
  const header = minimums ? 16 : 8; // the group block's scales (and minimums)
  const head = minimums ? 4 : 2; // the plain block's scale (and minimum)
  const blockBytes = head + payload;
  const groupBlockBytes = header + 4 * payload;
  const blocks = w.cols / 32;
  const rowBytes = blocks * blockBytes;
  if (row >= (w.rows & ~3)) return w.data.subarray(row * rowBytes, (row + 1) * rowBytes);
  const plain = new Uint8Array(rowBytes);
  const group = (row & ~3) * rowBytes;
  const lane = row & 3;
  for (let b = 0; b < blocks; b++) {
    const at = group + b * groupBlockBytes;
    plain[b * blockBytes] = w.data[at + 2 * lane]!;
    plain[b * blockBytes + 1] = w.data[at + 2 * lane + 1]!;
    if (minimums) {
      plain[b * blockBytes + 2] = w.data[at + 8 + 2 * lane]!;
      plain[b * blockBytes + 3] = w.data[at + 8 + 2 * lane + 1]!;
    }
    const from = at + header + payload * lane;
    const to = b * blockBytes + head;
    if (payload === 32) {
      plain.set(w.data.subarray(from, from + 32), to);
      continue;
    }
    if (payload === 20) {
      plain.set(w.data.subarray(from + 4, from + 20), to + 4);
      const lanes = w.data[from]! | (w.data[from + 1]! << 8) | (w.data[from + 2]! << 16) | (w.data[from + 3]! << 24);
      let qh = 0;
      // Element e's fifth bit: bit 8 (e % 4) + e / 4 for e < 16, 8 ((e - 16) % 4) + 4 + (e - 16) / 4 after.
      for (let e = 0; e < 32; e++) {
        const at = e < 16 ? 8 * (e % 4) + (e >> 2) : 8 * ((e - 16) % 4) + 4 + ((e - 16) >> 2);
        qh |= ((lanes >>> at) & 1) << e;
      }
      for (let i = 0; i < 4; i++) plain[to + i] = (qh >>> (8 * i)) & 0xff;
      continue;
    }
    // Plain Q4_0: byte e holds element e in its low nibble and element e + 16 in its high one.
    for (let j = 0; j < 8; j++) {
      const bits = (w.data[from + 2 * j]! | (w.data[from + 2 * j + 1]! << 8)) ^ 0x8888;
      plain[to + j] = (bits & 0xf) | (((bits >> 8) & 0xf) << 4);
      plain[to + 8 + j] = ((bits >> 4) & 0xf) | ((bits >> 12) << 4);
    }
  }
  return plain;
}

/** out[t, :] = embedding row tokens[t] (dequantized), times `scale`. out: [tokens, cols]. */
export function embeddingLookup(out: Float32Array, embedding: WeightMatrix, tokens: Int32Array, scale = 1): void {
  for (let t = 0; t < tokens.length; t++) {
    dequantizeMatrixRow(embedding, tokens[t]!, out, t * embedding.cols);
    if (scale !== 1) {
      const base = t * embedding.cols;
      for (let i = 0; i < embedding.cols; i++) out[base + i] = out[base + i]! * scale;
    }
  }
}
