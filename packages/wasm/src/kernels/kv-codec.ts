/**
 * Writing and reading KV cache elements in each encoding (see KVBuffer):
 * float32 as is, f16 rounded to nearest even, Q8_0 in ggml's layout (per
 * block of 32: d = max|x| / 127 kept as f16, q = round(x / d)).
 */
import { Q8_BLOCK, Q8_BLOCK_BYTES, type KVBuffer } from "./types.js";
import { f16Table65536, f32ToF16 } from "@infer/formats";

/** Bytes `elements` elements (a multiple of 32 for Q8_0) take in `encoding`. */
export function kvBytes(encoding: "f32" | "f16" | "q8_0", elements: number): number {
  if (encoding === "f32") return elements * 4;
  if (encoding === "f16") return elements * 2;
  return (elements / Q8_BLOCK) * Q8_BLOCK_BYTES;
}

/** Stores `row` at element offset `at` (for Q8_0 both `at` and row.length multiples of 32). */
export function writeKVRow(buffer: KVBuffer, at: number, row: Float32Array): void {
  if (buffer instanceof Float32Array) {
    buffer.set(row, at);
  } else if (buffer instanceof Uint16Array) {
    for (let i = 0; i < row.length; i++) buffer[at + i] = f32ToF16(row[i]!);
  } else {
    for (let block = 0; block < row.length / Q8_BLOCK; block++) writeQ8Block(buffer, ((at / Q8_BLOCK) + block) * Q8_BLOCK_BYTES, row, block * Q8_BLOCK);
  }
}

function writeQ8Block(bytes: Uint8Array, base: number, row: Float32Array, from: number): void {
  let amax = 0;
  for (let i = 0; i < Q8_BLOCK; i++) amax = Math.max(amax, Math.abs(row[from + i]!));
  const d = Math.fround(amax / 127);
  const inverse = d ? 1 / d : 0;
  const scale = f32ToF16(d);
  bytes[base] = scale & 0xff;
  bytes[base + 1] = scale >>> 8;
  for (let i = 0; i < Q8_BLOCK; i++) bytes[base + 2 + i] = Math.round(row[from + i]! * inverse) & 0xff;
}

/** A reader of element i of `buffer` as a number (decoding f16 and Q8_0). */
export function kvElementReader(buffer: KVBuffer): (i: number) => number {
  if (buffer instanceof Float32Array) return (i) => buffer[i]!;
  const halves = f16Table65536();
  if (buffer instanceof Uint16Array) return (i) => halves[buffer[i]!]!;
  return (i) => {
    const base = Math.floor(i / Q8_BLOCK) * Q8_BLOCK_BYTES;
    const q = (buffer[base + 2 + (i % Q8_BLOCK)]! << 24) >> 24; // int8
    return halves[buffer[base]! | (buffer[base + 1]! << 8)]! * q;
  };
}

/** `count` elements from element `from`, as float32. */
export function readKVRow(buffer: KVBuffer, from: number, count: number): Float32Array {
  if (buffer instanceof Float32Array) return buffer.slice(from, from + count);
  const element = kvElementReader(buffer);
  return Float32Array.from({ length: count }, (_, i) => element(from + i));
}
