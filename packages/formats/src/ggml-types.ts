/**
 * ggml's tensor encodings: block sizes, bytes per block, and dequantization
 * with exactly ggml's block layouts and formulas (ggml-common.h /
 * ggml-quants.c). All multi-byte fields are little-endian.
 *
 * Block layouts (bytes):
 *   Q4_0  [32]:  f16 d | u8 qs[16]                          = 18
 *   Q4_1  [32]:  f16 d | f16 m | u8 qs[16]                  = 20
 *   Q5_0  [32]:  f16 d | u8 qh[4] | u8 qs[16]               = 22
 *   Q5_1  [32]:  f16 d | f16 m | u8 qh[4] | u8 qs[16]       = 24
 *   Q8_0  [32]:  f16 d | i8 qs[32]                          = 34
 *   Q4_K [256]:  f16 d | f16 dmin | u8 scales[12] | u8 qs[128]               = 144
 *   Q5_K [256]:  f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]   = 176
 *   Q6_K [256]:  u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d              = 210
 */
import { InferenceError } from "@infer/core";
import { bf16ToF32, f16Table65536 } from "./half.js";

/** ggml tensor type ids, as stored in GGUF (ggml.h's enum ggml_type). */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
}

export interface GgmlTypeInfo {
  name: string;
  /** Elements per block (1 for plain floats). */
  blockSize: number;
  bytesPerBlock: number;
  /** The type's nominal bits per weight (Q4_K: 4), as quantizations are named; not bytesPerBlock * 8 / blockSize. */
  bits: number;
}

/** Super-block size of the K-quants. */
export const QK_K = 256;

const TYPE_INFO: ReadonlyMap<number, GgmlTypeInfo> = new Map([
  [GgmlType.F32, { name: "F32", blockSize: 1, bytesPerBlock: 4, bits: 32 }],
  [GgmlType.F16, { name: "F16", blockSize: 1, bytesPerBlock: 2, bits: 16 }],
  [GgmlType.BF16, { name: "BF16", blockSize: 1, bytesPerBlock: 2, bits: 16 }],
  [GgmlType.Q4_0, { name: "Q4_0", blockSize: 32, bytesPerBlock: 18, bits: 4 }],
  [GgmlType.Q4_1, { name: "Q4_1", blockSize: 32, bytesPerBlock: 20, bits: 4 }],
  [GgmlType.Q5_0, { name: "Q5_0", blockSize: 32, bytesPerBlock: 22, bits: 5 }],
  [GgmlType.Q5_1, { name: "Q5_1", blockSize: 32, bytesPerBlock: 24, bits: 5 }],
  [GgmlType.Q8_0, { name: "Q8_0", blockSize: 32, bytesPerBlock: 34, bits: 8 }],
  // Sizes known so files holding them parse (every type llama.cpp stores, ggml-common.h); they have no dequantizer here.
  [GgmlType.Q8_1, { name: "Q8_1", blockSize: 32, bytesPerBlock: 36, bits: 8 }],
  [GgmlType.Q2_K, { name: "Q2_K", blockSize: QK_K, bytesPerBlock: 84, bits: 2 }],
  [GgmlType.Q3_K, { name: "Q3_K", blockSize: QK_K, bytesPerBlock: 110, bits: 3 }],
  [GgmlType.Q4_K, { name: "Q4_K", blockSize: QK_K, bytesPerBlock: 144, bits: 4 }],
  [GgmlType.Q5_K, { name: "Q5_K", blockSize: QK_K, bytesPerBlock: 176, bits: 5 }],
  [GgmlType.Q6_K, { name: "Q6_K", blockSize: QK_K, bytesPerBlock: 210, bits: 6 }],
  [GgmlType.Q8_K, { name: "Q8_K", blockSize: QK_K, bytesPerBlock: 292, bits: 8 }],
  [GgmlType.IQ2_XXS, { name: "IQ2_XXS", blockSize: QK_K, bytesPerBlock: 66, bits: 2 }],
  [GgmlType.IQ2_XS, { name: "IQ2_XS", blockSize: QK_K, bytesPerBlock: 74, bits: 2 }],
  [GgmlType.IQ2_S, { name: "IQ2_S", blockSize: QK_K, bytesPerBlock: 82, bits: 2 }],
  [GgmlType.IQ3_XXS, { name: "IQ3_XXS", blockSize: QK_K, bytesPerBlock: 98, bits: 3 }],
  [GgmlType.IQ3_S, { name: "IQ3_S", blockSize: QK_K, bytesPerBlock: 110, bits: 3 }],
  [GgmlType.IQ1_S, { name: "IQ1_S", blockSize: QK_K, bytesPerBlock: 50, bits: 1 }],
  [GgmlType.IQ1_M, { name: "IQ1_M", blockSize: QK_K, bytesPerBlock: 56, bits: 1 }],
  [GgmlType.IQ4_NL, { name: "IQ4_NL", blockSize: 32, bytesPerBlock: 18, bits: 4 }],
  [GgmlType.IQ4_XS, { name: "IQ4_XS", blockSize: QK_K, bytesPerBlock: 136, bits: 4 }],
  [GgmlType.TQ1_0, { name: "TQ1_0", blockSize: QK_K, bytesPerBlock: 54, bits: 1 }],
  [GgmlType.TQ2_0, { name: "TQ2_0", blockSize: QK_K, bytesPerBlock: 66, bits: 2 }],
  [GgmlType.MXFP4, { name: "MXFP4", blockSize: 32, bytesPerBlock: 17, bits: 4 }],
  [GgmlType.NVFP4, { name: "NVFP4", blockSize: 64, bytesPerBlock: 36, bits: 4 }],
  [GgmlType.Q1_0, { name: "Q1_0", blockSize: 128, bytesPerBlock: 18, bits: 1 }],
  [GgmlType.Q2_0, { name: "Q2_0", blockSize: 64, bytesPerBlock: 18, bits: 2 }],
  [GgmlType.I8, { name: "I8", blockSize: 1, bytesPerBlock: 1, bits: 8 }],
  [GgmlType.I16, { name: "I16", blockSize: 1, bytesPerBlock: 2, bits: 16 }],
  [GgmlType.I32, { name: "I32", blockSize: 1, bytesPerBlock: 4, bits: 32 }],
  [GgmlType.I64, { name: "I64", blockSize: 1, bytesPerBlock: 8, bits: 64 }],
  [GgmlType.F64, { name: "F64", blockSize: 1, bytesPerBlock: 8, bits: 64 }],
]);

/** Types that dequantize() and quantize() handle. */
export const CODEC_TYPES: readonly GgmlType[] = [
  GgmlType.F32,
  GgmlType.F16,
  GgmlType.BF16,
  GgmlType.Q8_0,
  GgmlType.Q4_0,
  GgmlType.Q4_1,
  GgmlType.Q5_0,
  GgmlType.Q5_1,
  GgmlType.Q4_K,
  GgmlType.Q5_K,
  GgmlType.Q6_K,
];

/** Layout of a known type id, or undefined for ids this package does not know. */
export function findTypeInfo(type: number): GgmlTypeInfo | undefined {
  return TYPE_INFO.get(type);
}

export function typeInfo(type: GgmlType): GgmlTypeInfo {
  const info = TYPE_INFO.get(type);
  if (!info) throw new InferenceError("UNSUPPORTED_DTYPE", `unknown ggml type id ${type}`, { details: { type } });
  return info;
}

export function typeName(type: number): string {
  return TYPE_INFO.get(type)?.name ?? `type#${type}`;
}

/** Bytes taken by one row of `cols` elements; `cols` must be a multiple of the block size. */
export function rowBytes(type: GgmlType, cols: number): number {
  const info = typeInfo(type);
  if (!Number.isSafeInteger(cols) || cols < 0 || cols % info.blockSize !== 0) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `a ${info.name} row needs a multiple of ${info.blockSize} elements, got ${cols}`,
      { details: { type, cols } },
    );
  }
  return (cols / info.blockSize) * info.bytesPerBlock;
}

/**
 * Decodes `count` elements (a multiple of the block size) starting at byte
 * `srcOffset` of `src` into `out[outOffset ..]`.
 */
export function dequantizeRow(
  type: GgmlType,
  src: Uint8Array,
  srcOffset: number,
  count: number,
  out: Float32Array,
  outOffset: number,
): void {
  const bytes = rowBytes(type, count);
  if (srcOffset < 0 || srcOffset + bytes > src.length || outOffset < 0 || outOffset + count > out.length) {
    throw new InferenceError(
      "INTERNAL",
      `dequantizeRow(${typeName(type)}): ${count} elements need ${bytes} bytes at ${srcOffset} (have ${src.length}) ` +
        `and room at ${outOffset} (have ${out.length})`,
    );
  }
  const decodeBlocks = DECODERS.get(type);
  if (!decodeBlocks) {
    throw new InferenceError("UNSUPPORTED_DTYPE", `no dequantizer for ggml type ${typeName(type)}`, { details: { type } });
  }
  decodeBlocks(src, srcOffset, count, out, outOffset);
}

/** Decodes a whole buffer of `count` elements. */
export function dequantize(type: GgmlType, bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  dequantizeRow(type, bytes, 0, count, out, 0);
  return out;
}

type BlockDecoder = (src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number) => void;

// The decoders index bytes directly (no DataView): they run once per weight row.
function half(src: Uint8Array, at: number): number {
  return f16Table65536()[src[at]! | (src[at + 1]! << 8)]!;
}

function int8(byte: number): number {
  return (byte << 24) >> 24;
}

function uint32(src: Uint8Array, at: number): number {
  return (src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16) | (src[at + 3]! << 24)) >>> 0;
}

const fround = Math.fround;

const DECODERS: ReadonlyMap<GgmlType, BlockDecoder> = new Map<GgmlType, BlockDecoder>([
  [GgmlType.F32, decodeF32],
  [GgmlType.F16, decodeF16],
  [GgmlType.BF16, decodeBf16],
  [GgmlType.Q4_0, decodeQ4_0],
  [GgmlType.Q4_1, decodeQ4_1],
  [GgmlType.Q5_0, decodeQ5_0],
  [GgmlType.Q5_1, decodeQ5_1],
  [GgmlType.Q8_0, decodeQ8_0],
  [GgmlType.Q4_K, decodeQ4_K],
  [GgmlType.Q5_K, decodeQ5_K],
  [GgmlType.Q6_K, decodeQ6_K],
]);

function decodeF32(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  for (let i = 0; i < count; i++) out[outOffset + i] = view.getFloat32(offset + 4 * i, true);
}

function decodeF16(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let i = 0; i < count; i++) out[outOffset + i] = half(src, offset + 2 * i);
}

function decodeBf16(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let i = 0; i < count; i++) out[outOffset + i] = bf16ToF32(src[offset + 2 * i]! | (src[offset + 2 * i + 1]! << 8));
}

// Q4_0: y[j] = d * (lo4(qs[j]) - 8), y[j + 16] = d * (hi4(qs[j]) - 8).
function decodeQ4_0(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / 32; block++) {
    const at = offset + block * 18;
    const d = half(src, at);
    const y = outOffset + block * 32;
    for (let j = 0; j < 16; j++) {
      const q = src[at + 2 + j]!;
      out[y + j] = ((q & 0x0f) - 8) * d;
      out[y + j + 16] = ((q >> 4) - 8) * d;
    }
  }
}

// Q4_1: y = d * q + m with q unsigned 4-bit.
function decodeQ4_1(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / 32; block++) {
    const at = offset + block * 20;
    const d = half(src, at);
    const m = half(src, at + 2);
    const y = outOffset + block * 32;
    for (let j = 0; j < 16; j++) {
      const q = src[at + 4 + j]!;
      out[y + j] = fround((q & 0x0f) * d) + m;
      out[y + j + 16] = fround((q >> 4) * d) + m;
    }
  }
}

// Q5_0: the fifth bit of element j is bit j of the 32-bit qh; y = d * (q5 - 16).
function decodeQ5_0(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / 32; block++) {
    const at = offset + block * 22;
    const d = half(src, at);
    const qh = uint32(src, at + 2);
    const y = outOffset + block * 32;
    for (let j = 0; j < 16; j++) {
      const q = src[at + 6 + j]!;
      const low = (q & 0x0f) | (((qh >>> j) & 1) << 4);
      const high = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
      out[y + j] = (low - 16) * d;
      out[y + j + 16] = (high - 16) * d;
    }
  }
}

// Q5_1: as Q5_0 but unsigned with a minimum: y = d * q5 + m.
function decodeQ5_1(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / 32; block++) {
    const at = offset + block * 24;
    const d = half(src, at);
    const m = half(src, at + 2);
    const qh = uint32(src, at + 4);
    const y = outOffset + block * 32;
    for (let j = 0; j < 16; j++) {
      const q = src[at + 8 + j]!;
      const low = (q & 0x0f) | (((qh >>> j) & 1) << 4);
      const high = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
      out[y + j] = fround(low * d) + m;
      out[y + j + 16] = fround(high * d) + m;
    }
  }
}

function decodeQ8_0(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / 32; block++) {
    const at = offset + block * 34;
    const d = half(src, at);
    const y = outOffset + block * 32;
    for (let j = 0; j < 32; j++) out[y + j] = int8(src[at + 2 + j]!) * d;
  }
}

/**
 * The 6-bit scale and min of sub-block `j` (0..7) from the 12 packed bytes
 * (ggml's get_scale_min_k4): sub-blocks 0-3 keep their low 6 bits in bytes
 * 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 put their low 4 bits in the
 * nibbles of bytes 8-11 and their top 2 bits in the spare top bits of bytes 0-7.
 */
export function scaleMinK4(src: Uint8Array, scalesAt: number, j: number): { scale: number; min: number } {
  return { scale: scaleK4(src, scalesAt, j), min: minK4(src, scalesAt, j) };
}

function scaleK4(src: Uint8Array, at: number, j: number): number {
  return j < 4 ? src[at + j]! & 63 : (src[at + j + 4]! & 0x0f) | ((src[at + j - 4]! >> 6) << 4);
}

function minK4(src: Uint8Array, at: number, j: number): number {
  return j < 4 ? src[at + j + 4]! & 63 : (src[at + j + 4]! >> 4) | ((src[at + j]! >> 6) << 4);
}

// Q4_K: 8 sub-blocks of 32; sub-block pairs share 32 bytes of qs (low nibbles, then high).
function decodeQ4_K(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / QK_K; block++) {
    const at = offset + block * 144;
    const d = half(src, at);
    const dmin = half(src, at + 2);
    const qs = at + 16;
    let y = outOffset + block * QK_K;
    for (let pair = 0; pair < 4; pair++) {
      const d1 = fround(d * scaleK4(src, at + 4, 2 * pair));
      const m1 = fround(dmin * minK4(src, at + 4, 2 * pair));
      const d2 = fround(d * scaleK4(src, at + 4, 2 * pair + 1));
      const m2 = fround(dmin * minK4(src, at + 4, 2 * pair + 1));
      for (let l = 0; l < 32; l++) {
        const q = src[qs + 32 * pair + l]!;
        out[y + l] = fround(d1 * (q & 0x0f)) - m1;
        out[y + 32 + l] = fround(d2 * (q >> 4)) - m2;
      }
      y += 64;
    }
  }
}

// Q5_K: Q4_K plus a fifth bit per element; sub-block s takes bit s of qh[l].
function decodeQ5_K(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / QK_K; block++) {
    const at = offset + block * 176;
    const d = half(src, at);
    const dmin = half(src, at + 2);
    const qh = at + 16;
    const qs = at + 48;
    let y = outOffset + block * QK_K;
    for (let pair = 0; pair < 4; pair++) {
      const d1 = fround(d * scaleK4(src, at + 4, 2 * pair));
      const m1 = fround(dmin * minK4(src, at + 4, 2 * pair));
      const d2 = fround(d * scaleK4(src, at + 4, 2 * pair + 1));
      const m2 = fround(dmin * minK4(src, at + 4, 2 * pair + 1));
      for (let l = 0; l < 32; l++) {
        const q = src[qs + 32 * pair + l]!;
        const h = src[qh + l]!;
        const low = (q & 0x0f) | (((h >> (2 * pair)) & 1) << 4);
        const high = (q >> 4) | (((h >> (2 * pair + 1)) & 1) << 4);
        out[y + l] = fround(d1 * low) - m1;
        out[y + 32 + l] = fround(d2 * high) - m2;
      }
      y += 64;
    }
  }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales. Each half of 128 elements uses
// 64 bytes of ql (low nibbles) and 32 of qh (2 bits per element, 4 elements per byte).
function decodeQ6_K(src: Uint8Array, offset: number, count: number, out: Float32Array, outOffset: number): void {
  for (let block = 0; block < count / QK_K; block++) {
    const at = offset + block * 210;
    const d = half(src, at + 208);
    for (let part = 0; part < 2; part++) {
      const ql = at + 64 * part;
      const qh = at + 128 + 32 * part;
      const scales = at + 192 + 8 * part;
      const y = outOffset + block * QK_K + 128 * part;
      for (let l = 0; l < 32; l++) {
        const is = l >> 4;
        const lowA = src[ql + l]!;
        const lowB = src[ql + l + 32]!;
        const h = src[qh + l]!;
        const q1 = ((lowA & 0x0f) | ((h & 3) << 4)) - 32;
        const q2 = ((lowB & 0x0f) | (((h >> 2) & 3) << 4)) - 32;
        const q3 = ((lowA >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const q4 = ((lowB >> 4) | (((h >> 6) & 3) << 4)) - 32;
        out[y + l] = fround(d * int8(src[scales + is]!)) * q1;
        out[y + l + 32] = fround(d * int8(src[scales + is + 2]!)) * q2;
        out[y + l + 64] = fround(d * int8(src[scales + is + 4]!)) * q3;
        out[y + l + 96] = fround(d * int8(src[scales + is + 6]!)) * q4;
      }
    }
  }
}
