/**
 * Encoders for the types ggml-types.ts decodes.
 *
 * F16/BF16 round to nearest even. Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 follow ggml's
 * reference quantizers (quantize_row_q*_ref) step for step in f32 arithmetic,
 * so they give the same bytes. The K-quants use a simpler scale choice than
 * ggml's iterative search: per sub-block the min/max range is covered exactly
 * (scales rounded up, never clipping), so every element is within half a
 * quantization step of its input. The bytes are plain, valid K-quant blocks.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, QK_K, typeInfo } from "./ggml-types.js";
import { f16ToF32, f32ToBf16, f32ToF16 } from "./half.js";

const fround = Math.fround;

/** C's roundf / ggml's nearest_int: halves go away from zero. */
function roundHalfAway(value: number): number {
  return value < 0 ? -Math.floor(-value + 0.5) : Math.floor(value + 0.5);
}

/** C's float -> int8/uint8 cast (truncation toward zero). */
const truncate = Math.trunc;

type BlockEncoder = (x: Float32Array, from: number, out: DataView, at: number) => void;

const ENCODERS: ReadonlyMap<GgmlType, BlockEncoder> = new Map<GgmlType, BlockEncoder>([
  [GgmlType.F32, (x, from, out, at) => out.setFloat32(at, x[from]!, true)],
  [GgmlType.F16, (x, from, out, at) => out.setUint16(at, f32ToF16(x[from]!), true)],
  [GgmlType.BF16, (x, from, out, at) => out.setUint16(at, f32ToBf16(x[from]!), true)],
  [GgmlType.Q4_0, encodeQ4_0],
  [GgmlType.Q4_1, encodeQ4_1],
  [GgmlType.Q5_0, encodeQ5_0],
  [GgmlType.Q5_1, encodeQ5_1],
  [GgmlType.Q8_0, encodeQ8_0],
  [GgmlType.Q4_K, (x, from, out, at) => encodeKWithMin(x, from, out, at, 4)],
  [GgmlType.Q5_K, (x, from, out, at) => encodeKWithMin(x, from, out, at, 5)],
  [GgmlType.Q6_K, encodeQ6_K],
]);

/** Encodes `values` (length a multiple of the type's block size) in `type`. */
export function quantize(type: GgmlType, values: Float32Array): Uint8Array {
  const info = typeInfo(type);
  const encode = ENCODERS.get(type);
  if (!encode) throw new InferenceError("UNSUPPORTED_DTYPE", `no quantizer for ggml type ${info.name}`, { details: { type } });
  if (values.length % info.blockSize !== 0) {
    throw new InferenceError(
      "INVALID_OPTION",
      `quantize(${info.name}): ${values.length} values is not a multiple of the block size ${info.blockSize}`,
      { details: { type, count: values.length } },
    );
  }
  const blocks = values.length / info.blockSize;
  const bytes = new Uint8Array(blocks * info.bytesPerBlock);
  const view = new DataView(bytes.buffer);
  for (let block = 0; block < blocks; block++) encode(values, block * info.blockSize, view, block * info.bytesPerBlock);
  return bytes;
}

/** The value of largest magnitude (first one on ties) and that magnitude. */
function signedAbsMax(x: Float32Array, from: number, count: number): { amax: number; max: number } {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < count; j++) {
    const v = x[from + j]!;
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return { amax, max };
}

function minMax(x: Float32Array, from: number, count: number): { min: number; max: number } {
  let min = Infinity;
  let max = -Infinity;
  for (let j = 0; j < count; j++) {
    const v = x[from + j]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

// ---- 32-element blocks: ggml's reference quantizers ----

function encodeQ4_0(x: Float32Array, from: number, out: DataView, at: number): void {
  const { max } = signedAbsMax(x, from, 32);
  const d = fround(max / -8);
  const id = d ? fround(1 / d) : 0;
  out.setUint16(at, f32ToF16(d), true);
  for (let j = 0; j < 16; j++) {
    const low = Math.min(15, truncate(fround(fround(x[from + j]! * id) + 8.5)));
    const high = Math.min(15, truncate(fround(fround(x[from + 16 + j]! * id) + 8.5)));
    out.setUint8(at + 2 + j, low | (high << 4));
  }
}

function encodeQ4_1(x: Float32Array, from: number, out: DataView, at: number): void {
  const { min, max } = minMax(x, from, 32);
  const d = fround((max - min) / 15);
  const id = d ? fround(1 / d) : 0;
  out.setUint16(at, f32ToF16(d), true);
  out.setUint16(at + 2, f32ToF16(min), true);
  for (let j = 0; j < 16; j++) {
    const low = Math.min(15, truncate(fround(fround(fround(x[from + j]! - min) * id) + 0.5)));
    const high = Math.min(15, truncate(fround(fround(fround(x[from + 16 + j]! - min) * id) + 0.5)));
    out.setUint8(at + 4 + j, low | (high << 4));
  }
}

function encodeQ5_0(x: Float32Array, from: number, out: DataView, at: number): void {
  const { max } = signedAbsMax(x, from, 32);
  const d = fround(max / -16);
  const id = d ? fround(1 / d) : 0;
  out.setUint16(at, f32ToF16(d), true);
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const low = Math.min(31, truncate(fround(fround(x[from + j]! * id) + 16.5)));
    const high = Math.min(31, truncate(fround(fround(x[from + 16 + j]! * id) + 16.5)));
    out.setUint8(at + 6 + j, (low & 0x0f) | ((high & 0x0f) << 4));
    qh |= ((low >> 4) << j) | ((high >> 4) << (j + 16));
  }
  out.setUint32(at + 2, qh >>> 0, true);
}

function encodeQ5_1(x: Float32Array, from: number, out: DataView, at: number): void {
  const { min, max } = minMax(x, from, 32);
  const d = fround((max - min) / 31);
  const id = d ? fround(1 / d) : 0;
  out.setUint16(at, f32ToF16(d), true);
  out.setUint16(at + 2, f32ToF16(min), true);
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const low = truncate(fround(fround(fround(x[from + j]! - min) * id) + 0.5));
    const high = truncate(fround(fround(fround(x[from + 16 + j]! - min) * id) + 0.5));
    out.setUint8(at + 8 + j, (low & 0x0f) | ((high & 0x0f) << 4));
    qh |= (((low & 0x10) >> 4) << j) | (((high & 0x10) >> 4) << (j + 16));
  }
  out.setUint32(at + 4, qh >>> 0, true);
}

function encodeQ8_0(x: Float32Array, from: number, out: DataView, at: number): void {
  const { amax } = signedAbsMax(x, from, 32);
  const d = fround(amax / 127);
  const id = d ? fround(1 / d) : 0;
  out.setUint16(at, f32ToF16(d), true);
  for (let j = 0; j < 32; j++) out.setInt8(at + 2 + j, roundHalfAway(fround(x[from + j]! * id)));
}

// ---- K-quants ----

/** The smallest f16 (as bits) whose value is >= `value` (value >= 0). */
function f16AtLeast(value: number): number {
  const bits = f32ToF16(value);
  return f16ToF32(bits) < value ? bits + 1 : bits;
}

/**
 * Q4_K (bits 4) and Q5_K (bits 5): 8 sub-blocks of 32, each y = dl * q - ml with
 * dl = d * ls and ml = dmin * lm, ls and lm 6-bit. Mins are chosen first
 * (ml >= -min), then scales so that dl * levels >= max + ml: no element clips.
 */
function encodeKWithMin(x: Float32Array, from: number, out: DataView, at: number, bits: 4 | 5): void {
  const levels = (1 << bits) - 1;
  const mins = new Float64Array(8);
  const maxes = new Float64Array(8);
  for (let s = 0; s < 8; s++) {
    const range = minMax(x, from + 32 * s, 32);
    mins[s] = -Math.min(range.min, 0); // ggml keeps the offset one-signed: y >= -ml, ml >= 0
    maxes[s] = range.max;
  }
  const dminBits = f16AtLeast(Math.max(...mins) / 63);
  const dmin = f16ToF32(dminBits);
  const minLevels = mins.map((m) => (dmin > 0 ? Math.min(63, Math.ceil(m / dmin)) : 0));
  const minValues = minLevels.map((lm) => fround(dmin * lm));
  const neededScales = maxes.map((max, s) => Math.max(0, (max + minValues[s]!) / levels));
  const dBits = f16AtLeast(Math.max(...neededScales) / 63);
  const d = f16ToF32(dBits);
  const scaleLevels = neededScales.map((scale) => (d > 0 ? Math.min(63, Math.ceil(scale / d)) : 0));

  out.setUint16(at, dBits, true);
  out.setUint16(at + 2, dminBits, true);
  packScalesK4(out, at + 4, scaleLevels, minLevels);

  const quants = new Uint8Array(QK_K);
  for (let s = 0; s < 8; s++) {
    const dl = fround(d * scaleLevels[s]!);
    const ml = minValues[s]!;
    for (let l = 0; l < 32; l++) {
      const q = dl > 0 ? roundHalfAway((x[from + 32 * s + l]! + ml) / dl) : 0;
      quants[32 * s + l] = Math.max(0, Math.min(levels, q));
    }
  }
  const qsAt = bits === 4 ? at + 16 : at + 48;
  for (let pair = 0; pair < 4; pair++) {
    for (let l = 0; l < 32; l++) {
      const low = quants[64 * pair + l]!;
      const high = quants[64 * pair + 32 + l]!;
      out.setUint8(qsAt + 32 * pair + l, (low & 0x0f) | ((high & 0x0f) << 4));
    }
  }
  if (bits === 5) {
    for (let l = 0; l < 32; l++) {
      let h = 0;
      for (let s = 0; s < 8; s++) h |= (quants[32 * s + l]! >> 4) << s;
      out.setUint8(at + 16 + l, h);
    }
  }
}

/** Inverse of scaleMinK4: 8 six-bit scales and mins into 12 bytes. */
function packScalesK4(out: DataView, at: number, scales: Float64Array, mins: Float64Array): void {
  const packed = new Uint8Array(12);
  for (let j = 0; j < 8; j++) {
    const ls = scales[j]!;
    const lm = mins[j]!;
    if (j < 4) {
      packed[j]! |= ls;
      packed[j + 4]! |= lm;
    } else {
      packed[j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
      packed[j - 4]! |= (ls >> 4) << 6;
      packed[j]! |= (lm >> 4) << 6;
    }
  }
  for (let i = 0; i < 12; i++) out.setUint8(at + i, packed[i]!);
}

/**
 * Q6_K: 16 sub-blocks of 16, y = d * sc * (q - 32), sc int8. Each sub-block's
 * step covers its largest magnitude in 31 steps (q - 32 in [-31, 31]).
 */
function encodeQ6_K(x: Float32Array, from: number, out: DataView, at: number): void {
  const needed = new Float64Array(16);
  for (let s = 0; s < 16; s++) needed[s] = signedAbsMax(x, from + 16 * s, 16).amax / 31;
  const dBits = f16AtLeast(Math.max(...needed) / 127);
  const d = f16ToF32(dBits);
  const quants = new Uint8Array(QK_K);
  for (let s = 0; s < 16; s++) {
    const sc = d > 0 ? Math.min(127, Math.ceil(needed[s]! / d)) : 0;
    out.setInt8(at + 192 + s, sc);
    const dl = fround(d * sc);
    for (let l = 0; l < 16; l++) {
      const q = dl > 0 ? roundHalfAway(x[from + 16 * s + l]! / dl) : 0;
      quants[16 * s + l] = Math.max(-32, Math.min(31, q)) + 32;
    }
  }
  for (let part = 0; part < 2; part++) {
    for (let l = 0; l < 32; l++) {
      const base = 128 * part + l;
      const q1 = quants[base]!;
      const q2 = quants[base + 32]!;
      const q3 = quants[base + 64]!;
      const q4 = quants[base + 96]!;
      out.setUint8(at + 64 * part + l, (q1 & 0x0f) | ((q3 & 0x0f) << 4));
      out.setUint8(at + 64 * part + l + 32, (q2 & 0x0f) | ((q4 & 0x0f) << 4));
      out.setUint8(at + 128 + 32 * part + l, (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
  out.setUint16(at + 208, dBits, true);
}
