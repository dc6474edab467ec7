// Entry of kernels.wasm. Every function works on addresses in the one shared
// memory the host imports; the module allocates nothing itself, so any number
// of instances (one per worker thread) can run on the same memory at once.
// Its only static data (below heapBase: Math.exp's constant table and a few
// vector constants) is written by each instantiation with the same bytes, so
// re-writing it is harmless.

import { dotBF16, dotF16, dotQ4_0, dotQ8_0 } from "./dot";
import { dotQ4_K, dotQ5_K, dotQ6_K } from "./kquants";
import { decodeLegacy, dotLegacy, Q4_1, Q5_0, Q5_1 } from "./legacy";
import { decodeHalves, decodeQ4_0, decodeQ4_K, decodeQ5_K, decodeQ6_K, decodeQ8_0 } from "./decode";
export { activationQuantBytes, activationScaleBytes, quantizeActivations } from "./quantize";
export { attention, attentionChunks, attentionCombine, attentionRecordBytes, attentionScratchBytes } from "./attention";
export { gatedActivation, gatedBackward } from "./activation";
export { trainAttentionBackward, trainAttentionForward, trainAttentionScratchBytes } from "./train-attention";
export { crossEntropyRows } from "./train-loss";
export { transposeColumns } from "./transpose";
export { gemm, gemmScratchBytes } from "./gemm";
export { addRepeated, argmax, rmsNorm, rope } from "./elementwise";
import { decodeGroupRowFiveBits, decodeGroupRowQ4_0, decodeGroupToTile, dotQ4_0Group, dotQ5_0Group, dotQ5_1Group, dotQ8_0Group, groupBlockBytes, interleaveRows } from "./interleave";
import { dotPackedRowsF32x2, dotPackedTile, sumLanes4f, dotPackedTile8, EIGHT_TOKEN_PASS_FROM, interleave4, minimumsTerm4, minimumsTerm4Quantized, packRowsF32, packTile, TILE_ROWS, tileScratchBytes } from "./tile";

// ggml type ids (GgmlType in src/kernels/types.ts).
const F32 = 0;
const F16 = 1;
const Q4_0 = 2;
const Q8_0 = 8;
const Q4_K = 12;
const Q5_K = 13;
const Q6_K = 14;
const BF16 = 30;
/** Not ggml types: Q4_0 / Q8_0 / Q5_0 / Q5_1 rows interleaved in groups of four at load (interleave.ts). */
const Q4_0_X4 = 1000;
const Q8_0_X4 = 1001;
const Q5_0_X4 = 1002;
const Q5_1_X4 = 1003;

/** Whether `type` is one of the interleaved layouts. */
function isGrouped(type: i32): bool {
  return type == Q4_0_X4 || type == Q8_0_X4 || type == Q5_0_X4 || type == Q5_1_X4;
}

/** Payload bytes per row and block of the interleaved layout of `type` (plain or _X4; interleave.ts): 20 for Q5_0 and Q5_1. */
function groupPayload(type: i32): usize {
  return type == Q4_0 || type == Q4_0_X4 ? 16 : type == Q8_0 || type == Q8_0_X4 ? 32 : 20;
}

/** First address past the module's own static data: the host allocates from here. */
export function heapBase(): usize {
  return __heap_base;
}

/** Bytes of one weight row of `cols` elements, or 0 for a type this module does not read. */
export function rowBytes(type: i32, cols: i32): i32 {
  switch (type) {
    case F32:
      return cols * 4;
    case F16:
    case BF16:
      return cols * 2;
    case Q8_0:
    case Q8_0_X4:
      return (cols / 32) * 34;
    case Q4_0:
    case Q4_0_X4:
      return (cols / 32) * 18;
    case Q4_1:
      return (cols / 32) * 20;
    case Q5_0:
    case Q5_0_X4:
      return (cols / 32) * 22;
    case Q5_1:
    case Q5_1_X4:
      return (cols / 32) * 24;
    case Q4_K:
      return (cols / 256) * 144;
    case Q5_K:
      return (cols / 256) * 176;
    case Q6_K:
      return (cols / 256) * 210;
    default:
      return 0;
  }
}

/**
 * Rewrites a Q4_0, Q8_0, Q5_0 or Q5_1 matrix at w into Q4_0_X4 / Q8_0_X4 / Q5_0_X4 / Q5_1_X4 in
 * place (interleave.ts); scratch: 4 * rowBytes(type, cols) bytes. Other types: nothing.
 */
export function interleave(type: i32, w: usize, rows: i32, cols: i32, scratch: usize): void {
  if (type == Q4_0 || type == Q8_0 || type == Q5_0 || type == Q5_1) interleaveRows(w, rows, cols, groupPayload(type), scratch, type == Q5_1);
}

/** Scratch bytes one thread needs to decode a row of `cols` (see matmul's `scratch`). */
export function decodeScratchBytes(cols: i32): i32 {
  return tileScratchBytes(cols);
}

/** Scratch bytes one thread's decode (batch 1) matmul writes to (interleave.ts's `sink`). */
const DECODE_SINK_BYTES = 128;

/** DECODE_SINK_BYTES, for the host. */
export function decodeSinkBytes(): i32 {
  return DECODE_SINK_BYTES;
}

/**
 * out[b, r] = W[r, :] · x[b, :] for rowStart <= r < rowEnd and b < batch.
 * w: [rows, rowBytes] in the stored encoding. out: the f32 result of row
 * rowStart for activation row 0; activation row b's results start outStride
 * floats after row b - 1's (rows for a whole [batch, rows] output, less for a
 * thread's own tile of it: the gated MLP's up products).
 * Float types read x: [batch, cols] f32; quantized types read the quantized
 * activations xq: [batch, cols] i16 and xd, xs, xb: [batch, cols / 32] f32
 * (see quantize.ts; for batches of EIGHT_TOKEN_PASS_FROM or more, xq and xd continue with the copies interleaved
 * by four tokens that the prefill tile reads). With batch > 1, rows are decoded four
 * at a time (decode.ts, tile.ts) into this thread's `scratch` of decodeScratchBytes(cols) bytes; with batch 1
 * the Q4_0_X4, Q8_0_X4, Q5_0_X4, Q5_1_X4, Q4_K, Q5_K and Q6_K loops write to its first
 * DECODE_SINK_BYTES (interleave.ts, kquants.ts). The _X4 types are Q4_0 / Q8_0 / Q5_0 / Q5_1
 * interleaved by four rows at load (interleave.ts); a thread's rows may start or end inside
 * one of their groups.
 */
export function matmul(
  type: i32,
  out: usize,
  w: usize,
  rows: i32,
  cols: i32,
  x: usize,
  xq: usize,
  xd: usize,
  xs: usize,
  xb: usize,
  batch: i32,
  scratch: usize,
  rowStart: i32,
  rowEnd: i32,
  outStride: i32,
): void {
  if (batch > 1 && type != F32) {
    matmulDecoded(type, out, w, rows, cols, x, xq, xd, xs, xb, batch, scratch, rowStart, rowEnd, outStride);
    return;
  }
  if (type == F32) {
    matmulF32Batch(out, w, cols, x, batch, scratch, rowStart, rowEnd, outStride);
    return;
  }
  const stride = <usize>rowBytes(type, cols);
  const blocks = cols / 32;
  if (isGrouped(type) && batch == 1) {
    matmulInterleaved(type, out, w, rows, blocks, xq, xd, xb, rowStart, rowEnd, scratch);
    return;
  }
  for (let r = rowStart; r < rowEnd; r++) {
    const row = w + <usize>r * stride;
    for (let b = 0; b < batch; b++) {
      const xOffset = <usize>b * <usize>cols; // elements
      const blockOffset = <usize>b * <usize>blocks * 4;
      let value: f32 = 0;
      switch (type) {
        case Q8_0:
          value = dotQ8_0(row, xq + xOffset * 2, xd + blockOffset, blocks);
          break;
        case Q4_0:
          value = dotQ4_0(row, xq + xOffset * 2, xd + blockOffset, xb + blockOffset, blocks);
          break;
        case Q4_1:
        case Q5_0:
        case Q5_1:
          value = dotLegacy(type, row, xq + xOffset * 2, xd + blockOffset, xb + blockOffset, blocks);
          break;
        case Q4_K:
          value = dotQ4_K(row, xq + xOffset * 2, xd + blockOffset, xs + blockOffset, cols / 256, scratch);
          break;
        case Q5_K:
          value = dotQ5_K(row, xq + xOffset * 2, xd + blockOffset, xs + blockOffset, cols / 256, scratch);
          break;
        case Q6_K:
          value = dotQ6_K(row, xq + xOffset * 2, xd + blockOffset, cols / 256, scratch);
          break;
        case F16:
          value = dotF16(row, x + xOffset * 4, cols);
          break;
        case BF16:
          value = dotBF16(row, x + xOffset * 4, cols);
          break;
        default:
          unreachable();
      }
      store<f32>(out + ((<usize>b * <usize>outStride + <usize>(r - rowStart)) << 2), value);
    }
  }
}

function matmulDecoded(
  type: i32,
  out: usize,
  w: usize,
  rows: i32,
  cols: i32,
  x: usize,
  xq: usize,
  xd: usize,
  xs: usize,
  xb: usize,
  batch: i32,
  scratch: usize,
  rowStart: i32,
  rowEnd: i32,
  outStride: i32,
): void {
  const stride = <usize>rowBytes(type, cols);
  const blocks = cols / 32;
  const halves = type == F16 || type == BF16;
  // scratch (tile.ts): four decoded rows, their scales and mins per row, the mins as [blocks][4],
  // the results and running sums, then the packed tile.
  const decodedBytes = <usize>cols * (halves ? 4 : 2);
  const scales = scratch + TILE_ROWS * decodedBytes;
  const mins = scales + TILE_ROWS * <usize>blocks * 4;
  const mins4 = mins + TILE_ROWS * <usize>blocks * 4;
  const results = mins4 + TILE_ROWS * <usize>blocks * 4; // 8 x f32x4
  const sums = results + 128; // 8 x f32x4
  const packed = sums + 128; // packTile's layout, or packRowsF32's
  const rowValuesBytes = <usize>blocks * 4;
  // quantizeActivations' copies interleaved by four tokens (interleaveTokens, for batches the
  // eight-token pass reads) follow its plain arrays.
  const xq4 = xq + <usize>batch * <usize>cols * 2;
  const xd4 = xd + <usize>batch * rowValuesBytes;
  // Rows go through in tiles of four; a last, partial tile repeats its last row
  // in the spare lanes. Every row then takes the same arithmetic wherever the
  // threads' shares split the rows, so results do not depend on the split.
  for (let r = rowStart; r < rowEnd; r += TILE_ROWS) {
    const count = min(TILE_ROWS, rowEnd - r);
    // Four rows that are one interleaved group decode straight into the packed tile (Q5_1_X4's,
    // whose minimums go to the mins, row by row below).
    const wholeGroup = isGrouped(type) && type != Q5_1_X4 && (r & 3) == 0 && r + TILE_ROWS <= (rows & ~3);
    if (wholeGroup) decodeGroupToTile(w + <usize>r * stride, blocks, groupPayload(type), packed);
    for (let k = 0; k < TILE_ROWS && !wholeGroup; k++) {
      const row = r + min(k, count - 1);
      decodeRowSpan(type, w, rows, cols, row, 0, cols, scratch + <usize>k * decodedBytes, scales + <usize>k * rowValuesBytes, mins + <usize>k * rowValuesBytes);
    }
    const tileOut = out + (<usize>(r - rowStart) << 2);
    const outStrideBytes = <usize>outStride << 2; // from one activation row's outputs to the next
    if (halves) {
      packRowsF32(scratch, cols, packed);
      for (let b = 0; b < batch; b += 2) {
        // Activation rows in pairs; an odd last row is paired with itself (the same arithmetic per row).
        const second = min(b + 1, batch - 1);
        dotPackedRowsF32x2(packed, scratch, cols, x + <usize>b * <usize>cols * 4, x + <usize>second * <usize>cols * 4, results, results + 16);
        storeLanes(tileOut + <usize>b * outStrideBytes, v128.load(results), count);
        if (second > b) storeLanes(tileOut + <usize>second * outStrideBytes, v128.load(results, 16), count);
      }
      continue;
    }
    if (!wholeGroup) packTile(scratch, scales, blocks, packed);
    if (hasMinimums(type)) interleave4(mins, blocks, mins4);
    for (let b = 0; b < batch; ) {
      // Tokens eight at a time while seven or more are left (lanes past the batch are the
      // zero padding of interleaveTokens, computed and dropped), then four, then one by one.
      const tokens = min(batch - b >= EIGHT_TOKEN_PASS_FROM ? 8 : 4, batch - b);
      if (tokens > 4) {
        dotPackedTile8(packed, xq4 + <usize>b * <usize>cols * 2, xd4 + <usize>b * rowValuesBytes, blocks, results, sums);
      } else {
        dotPackedTile(packed, xq + <usize>b * <usize>cols * 2, xd + <usize>b * rowValuesBytes, blocks, tokens, results);
      }
      for (let j = 0; j < tokens; j++) {
        let value = v128.load(results + (<usize>j << 4));
        const rowBlocks = <usize>(b + j) * rowValuesBytes;
        if (type == Q4_K || type == Q5_K) value = f32x4.sub(value, minimumsTerm4(mins4, xs + rowBlocks, blocks));
        else if (hasMinimums(type)) value = f32x4.sub(value, minimumsTerm4Quantized(mins4, xd + rowBlocks, xb + rowBlocks, blocks));
        storeLanes(tileOut + <usize>(b + j) * outStrideBytes, value, count);
      }
      b += tokens;
    }
  }
}

/**
 * Columns [from, from + count) of row `row` of w (a quantized type, F16 or BF16) in plain
 * form: int16 quants, scales and mins per block of 32 (decoded = scale * q16 - min), or f32
 * for F16 / BF16. from and count: whole blocks of the type (256 elements for the K-quants).
 */
function decodeRowSpan(type: i32, w: usize, rows: i32, cols: i32, row: i32, from: i32, count: i32, decoded: usize, rowScales: usize, rowMins: usize): void {
  const stride = <usize>rowBytes(type, cols);
  const blocks = count / 32;
  // The span's first byte in a plain row (rowBytes of the elements before it).
  const plainRow = w + <usize>row * stride + <usize>rowBytes(type, from);
  // A row of an interleaved group (the tail rows after the groups are plain): the span's first group block.
  const grouped = isGrouped(type) && row < (rows & ~3);
  const group = w + <usize>(row & ~3) * stride + <usize>(from / 32) * groupBlockBytes(groupPayload(type), type == Q5_1_X4);
  if (type == Q8_0 || type == Q8_0_X4) {
    // Block i's scale at scaleAt + i * blockStride, its quants 2 bytes on, or at the row's lane offset in a group.
    const scaleAt = grouped ? group + 2 * <usize>(row & 3) : plainRow;
    const quantsAt = grouped ? group + 8 + 32 * <usize>(row & 3) : plainRow + 2;
    decodeQ8_0(scaleAt, quantsAt, grouped ? groupBlockBytes(32) : 34, blocks, decoded, rowScales, rowMins);
  } else if (grouped && (type == Q5_0_X4 || type == Q5_1_X4)) {
    decodeGroupRowFiveBits(group, row & 3, blocks, decoded, rowScales, rowMins, type == Q5_1_X4);
  } else if (grouped) {
    decodeGroupRowQ4_0(group, row & 3, blocks, decoded, rowScales, rowMins); // signed-nibble lanes
  } else if (type == Q4_0 || type == Q4_0_X4) {
    decodeQ4_0(plainRow, blocks, decoded, rowScales, rowMins);
  } else {
    decodeRow(plainLegacy(type), plainRow, count, decoded, rowScales, rowMins); // Q5_0_X4 / Q5_1_X4: a tail row
  }
}

/** Scratch bytes one thread of dequantizeTransposed needs for spans of `count` columns. */
export function transposeScratchBytes(count: i32): i32 {
  return TILE_ROWS * count * 4 + 2 * TILE_ROWS * (count / 32) * 4;
}

/**
 * Rows [rowStart, rowEnd) and columns [from, from + count) of w dequantized to f32 and
 * transposed: element (r, c) to out + ((c - from) * outStride + r - rowStart) * 4 (training's
 * backward through a frozen matrix reads wᵀ). Four rows at a time are decoded as matmul decodes
 * them (decodeRowSpan) into this thread's `scratch` (transposeScratchBytes(count)), then
 * written four columns at a time, each column's four values one vector. from and count: whole
 * blocks of the type (256 elements for the K-quants, 32 for the others, 4 for the float types).
 */
export function dequantizeTransposed(type: i32, w: usize, rows: i32, cols: i32, from: i32, count: i32, out: usize, outStride: i32, rowStart: i32, rowEnd: i32, scratch: usize): void {
  const halves = type == F16 || type == BF16;
  const floats = halves || type == F32;
  const decodedBytes = <usize>count * (halves ? 4 : 2);
  const valuesBytes = <usize>(count / 32) * 4; // one row's scales (or mins)
  const scales = scratch + TILE_ROWS * decodedBytes;
  const mins = scales + TILE_ROWS * valuesBytes;
  const columnBytes = <usize>outStride << 2;
  for (let r = rowStart; r < rowEnd; r += TILE_ROWS) {
    const tile = min(TILE_ROWS, rowEnd - r);
    // Row k's f32 values (F32: in place), or its int16 quants at scratch + k * decodedBytes.
    const last = r + tile - 1;
    let p0 = scratch;
    let p1 = scratch + decodedBytes;
    let p2 = scratch + 2 * decodedBytes;
    let p3 = scratch + 3 * decodedBytes;
    if (type == F32) {
      const rowBytesF32 = <usize>cols << 2;
      const at = w + (<usize>from << 2);
      p0 = at + <usize>r * rowBytesF32;
      p1 = at + <usize>min(r + 1, last) * rowBytesF32;
      p2 = at + <usize>min(r + 2, last) * rowBytesF32;
      p3 = at + <usize>min(r + 3, last) * rowBytesF32;
    } else {
      for (let k = 0; k < TILE_ROWS; k++) {
        decodeRowSpan(type, w, rows, cols, min(r + k, last), from, count, scratch + <usize>k * decodedBytes, scales + <usize>k * valuesBytes, mins + <usize>k * valuesBytes);
      }
    }
    let to = out + (<usize>(r - rowStart) << 2);
    for (let j = 0; j < count; j += 4) {
      let v0: v128, v1: v128, v2: v128, v3: v128;
      if (floats) {
        const o = <usize>j << 2;
        v0 = v128.load(p0 + o);
        v1 = v128.load(p1 + o);
        v2 = v128.load(p2 + o);
        v3 = v128.load(p3 + o);
      } else {
        const o = <usize>j << 1;
        const b = <usize>(j >> 5) << 2; // the block's scale and min
        v0 = dequantized4(p0 + o, scales + b, mins + b);
        v1 = dequantized4(p1 + o, scales + valuesBytes + b, mins + valuesBytes + b);
        v2 = dequantized4(p2 + o, scales + 2 * valuesBytes + b, mins + 2 * valuesBytes + b);
        v3 = dequantized4(p3 + o, scales + 3 * valuesBytes + b, mins + 3 * valuesBytes + b);
      }
      // Vector i: column j + i of the four rows.
      const t0 = i32x4.shuffle(v0, v1, 0, 4, 1, 5);
      const t1 = i32x4.shuffle(v0, v1, 2, 6, 3, 7);
      const t2 = i32x4.shuffle(v2, v3, 0, 4, 1, 5);
      const t3 = i32x4.shuffle(v2, v3, 2, 6, 3, 7);
      storeLanes(to, i32x4.shuffle(t0, t2, 0, 1, 4, 5), tile);
      storeLanes(to + columnBytes, i32x4.shuffle(t0, t2, 2, 3, 6, 7), tile);
      storeLanes(to + 2 * columnBytes, i32x4.shuffle(t1, t3, 0, 1, 4, 5), tile);
      storeLanes(to + 3 * columnBytes, i32x4.shuffle(t1, t3, 2, 3, 6, 7), tile);
      to += 4 * columnBytes;
    }
  }
}

/** Four int16 quants at q16 as f32: scale * q - min (decode.ts's plain form). */
function dequantized4(q16: usize, scale: usize, minimum: usize): v128 {
  const q = f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(v128.load64_zero(q16)));
  return f32x4.sub(f32x4.mul(q, v128.load32_splat(scale)), v128.load32_splat(minimum));
}

/**
 * F32 rows [rowStart, rowEnd) times a batch of activation rows: two activation
 * rows at a time against each tile of four weight rows (dotRowsF32x2), so each
 * weight load feeds two products and each activation load four, where a
 * row-by-row dot product loads both operands for every product. The rows of a
 * thread's share stay in cache while the activation rows stream past them
 * once. A last, partial tile repeats its last row, and each row's arithmetic
 * is its own, so results do not depend on how threads split the rows, nor on
 * the batch: one activation row (decode) takes the same arithmetic alone.
 */
function matmulF32Batch(out: usize, w: usize, cols: i32, x: usize, batch: i32, scratch: usize, rowStart: i32, rowEnd: i32, outStride: i32): void {
  const rowBytesF32 = <usize>cols << 2;
  const outStrideBytes = <usize>outStride << 2;
  for (let b = 0; b < batch; b += 2) {
    // Activation rows in pairs; an odd last row alone (dotRowsF32: the same arithmetic per row).
    const second = min(b + 1, batch - 1);
    if (second == b) {
      const xa = x + <usize>b * rowBytesF32;
      const outA = out + <usize>b * outStrideBytes;
      for (let r = rowStart; r < rowEnd; r += TILE_ROWS) {
        const last = rowEnd - 1;
        const sums = dotRowsF32(w + <usize>r * rowBytesF32, w + <usize>min(r + 1, last) * rowBytesF32, w + <usize>min(r + 2, last) * rowBytesF32, w + <usize>min(r + 3, last) * rowBytesF32, xa, cols);
        storeLanes(outA + (<usize>(r - rowStart) << 2), sums, min(TILE_ROWS, rowEnd - r));
      }
      continue;
    }
    const xa = x + <usize>b * rowBytesF32;
    const xb = x + <usize>second * rowBytesF32;
    const outA = out + <usize>b * outStrideBytes;
    const outB = out + <usize>second * outStrideBytes;
    for (let r = rowStart; r < rowEnd; r += TILE_ROWS) {
      const last = rowEnd - 1;
      dotRowsF32x2(w + <usize>r * rowBytesF32, w + <usize>min(r + 1, last) * rowBytesF32, w + <usize>min(r + 2, last) * rowBytesF32, w + <usize>min(r + 3, last) * rowBytesF32, xa, xb, cols, scratch);
      const count = min(TILE_ROWS, rowEnd - r);
      const at = <usize>(r - rowStart) << 2;
      storeLanes(outA + at, v128.load(scratch), count);
      storeLanes(outB + at, v128.load(scratch, 16), count);
    }
  }
}

/** As dotRowsF32x2 for one activation row: lane k = row k's dot product with xa, the same arithmetic. */
function dotRowsF32(r0: usize, r1: usize, r2: usize, r3: usize, xa: usize, cols: i32): v128 {
  let a0 = f32x4.splat(0);
  let a1 = a0;
  let a2 = a0;
  let a3 = a0;
  let o: usize = 0;
  const end = <usize>(cols & ~3) << 2;
  for (; o < end; o += 16) {
    const xv = v128.load(xa + o);
    a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(r0 + o)));
    a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(r1 + o)));
    a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(r2 + o)));
    a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(r3 + o)));
  }
  let sums = sumLanes4f(a0, a1, a2, a3);
  for (let i = cols & ~3; i < cols; i++) {
    const e = <usize>i << 2;
    let k = f32x4.splat(load<f32>(r0 + e));
    k = f32x4.replace_lane(k, 1, load<f32>(r1 + e));
    k = f32x4.replace_lane(k, 2, load<f32>(r2 + e));
    k = f32x4.replace_lane(k, 3, load<f32>(r3 + e));
    sums = f32x4.add(sums, f32x4.mul(f32x4.splat(load<f32>(xa + e)), k));
  }
  return sums;
}

/**
 * Rows r0..r3 · activation rows xa and xb (cols floats each): f32x4 at results
 * and results + 16, lane k = row k's dot product. Each row and activation row
 * accumulates its chunks of four in order into one vector, summed across
 * lanes at the end, then the last cols % 4 elements.
 */
function dotRowsF32x2(r0: usize, r1: usize, r2: usize, r3: usize, xa: usize, xb: usize, cols: i32, results: usize): void {
  let a0 = f32x4.splat(0);
  let a1 = a0;
  let a2 = a0;
  let a3 = a0;
  let b0 = a0;
  let b1 = a0;
  let b2 = a0;
  let b3 = a0;
  let o: usize = 0;
  const end = <usize>(cols & ~3) << 2;
  for (; o < end; o += 16) {
    const xv = v128.load(xa + o);
    const yv = v128.load(xb + o);
    const w0 = v128.load(r0 + o);
    a0 = f32x4.add(a0, f32x4.mul(xv, w0));
    b0 = f32x4.add(b0, f32x4.mul(yv, w0));
    const w1 = v128.load(r1 + o);
    a1 = f32x4.add(a1, f32x4.mul(xv, w1));
    b1 = f32x4.add(b1, f32x4.mul(yv, w1));
    const w2 = v128.load(r2 + o);
    a2 = f32x4.add(a2, f32x4.mul(xv, w2));
    b2 = f32x4.add(b2, f32x4.mul(yv, w2));
    const w3 = v128.load(r3 + o);
    a3 = f32x4.add(a3, f32x4.mul(xv, w3));
    b3 = f32x4.add(b3, f32x4.mul(yv, w3));
  }
  let sumsA = sumLanes4f(a0, a1, a2, a3);
  let sumsB = sumLanes4f(b0, b1, b2, b3);
  for (let i = cols & ~3; i < cols; i++) {
    const e = <usize>i << 2;
    let k = f32x4.splat(load<f32>(r0 + e));
    k = f32x4.replace_lane(k, 1, load<f32>(r1 + e));
    k = f32x4.replace_lane(k, 2, load<f32>(r2 + e));
    k = f32x4.replace_lane(k, 3, load<f32>(r3 + e));
    sumsA = f32x4.add(sumsA, f32x4.mul(f32x4.splat(load<f32>(xa + e)), k));
    sumsB = f32x4.add(sumsB, f32x4.mul(f32x4.splat(load<f32>(xb + e)), k));
  }
  v128.store(results, sumsA);
  v128.store(results, sumsB, 16);
}

/**
 * Q4_0_X4, Q8_0_X4, Q5_0_X4 or Q5_1_X4 rows [rowStart, rowEnd) times one activation row (interleave.ts):
 * whole groups four rows at a time, a group cut by the range computed whole
 * with only its rows in range stored (each lane's arithmetic is its row's
 * alone, so the same bits wherever threads split), the plain tail rows one by one.
 * sink: DECODE_SINK_BYTES of this thread's scratch (the group loops' stores).
 */
function matmulInterleaved(type: i32, out: usize, w: usize, rows: i32, blocks: i32, xq: usize, xd: usize, xb: usize, rowStart: i32, rowEnd: i32, sink: usize): void {
  const groupRows = rows & ~3;
  const stride = <usize>rowBytes(type, blocks * 32);
  let r = rowStart;
  while (r < min(rowEnd, groupRows)) {
    const group = r & ~3;
    const g = w + <usize>group * stride;
    let values: v128;
    if (type == Q4_0_X4) values = dotQ4_0Group(g, xq, xd, blocks, sink);
    else if (type == Q8_0_X4) values = dotQ8_0Group(g, xq, xd, blocks, sink);
    else if (type == Q5_0_X4) values = dotQ5_0Group(g, xq, xd, xb, blocks, sink);
    else values = dotQ5_1Group(g, xq, xd, xb, blocks, sink);
    const end = min(group + 4, rowEnd);
    for (; r < end; r++) storeLane(out + (<usize>(r - rowStart) << 2), values, r - group);
  }
  for (; r < rowEnd; r++) {
    const row = w + <usize>r * stride;
    let value: f32;
    if (type == Q4_0_X4) value = dotQ4_0(row, xq, xd, xb, blocks);
    else if (type == Q8_0_X4) value = dotQ8_0(row, xq, xd, blocks);
    else value = dotLegacy(plainLegacy(type), row, xq, xd, xb, blocks);
    store<f32>(out + (<usize>(r - rowStart) << 2), value);
  }
}

/** Lane `lane` (0..3) of `value` to at. */
function storeLane(at: usize, value: v128, lane: i32): void {
  switch (lane) {
    case 0:
      store<f32>(at, f32x4.extract_lane(value, 0));
      break;
    case 1:
      store<f32>(at, f32x4.extract_lane(value, 1));
      break;
    case 2:
      store<f32>(at, f32x4.extract_lane(value, 2));
      break;
    default:
      store<f32>(at, f32x4.extract_lane(value, 3));
  }
}

/** The first `count` (1..4) lanes of `value` to at. */
function storeLanes(at: usize, value: v128, count: i32): void {
  if (count == 4) {
    v128.store(at, value);
    return;
  }
  store<f32>(at, f32x4.extract_lane(value, 0));
  if (count > 1) store<f32>(at, f32x4.extract_lane(value, 1), 4);
  if (count > 2) store<f32>(at, f32x4.extract_lane(value, 2), 8);
}

/**
 * Types whose blocks subtract a minimum (decoded rows' mins): Q4_K's and Q5_K's meet the
 * activations' float sums, Q4_1's and Q5_1's their quantized sums (legacy.ts).
 */
function hasMinimums(type: i32): bool {
  return type == Q4_K || type == Q5_K || type == Q4_1 || type == Q5_1 || type == Q5_1_X4;
}

/** The plain type of a Q5_0_X4 / Q5_1_X4 matrix's tail rows (legacy.ts); any other type itself. */
function plainLegacy(type: i32): i32 {
  return type == Q5_0_X4 ? Q5_0 : type == Q5_1_X4 ? Q5_1 : type;
}

/**
 * One Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, F16 or BF16 weight row into plain form (decode.ts, legacy.ts): int16 quants with per-block
 * scales and mins, or f32 (Q4_0 and Q8_0 rows, which may be interleaved, decode in matmulDecoded).
 */
function decodeRow(type: i32, row: usize, cols: i32, q16: usize, scales: usize, mins: usize): void {
  switch (type) {
    case Q4_1:
    case Q5_0:
    case Q5_1:
      decodeLegacy(type, row, cols / 32, q16, scales, mins);
      break;
    case Q4_K:
      decodeQ4_K(row, cols / 256, q16, scales, mins);
      break;
    case Q5_K:
      decodeQ5_K(row, cols / 256, q16, scales, mins);
      break;
    case Q6_K:
      decodeQ6_K(row, cols / 256, q16, scales, mins);
      break;
    case F16:
    case BF16:
      decodeHalves(row, cols, q16, type == BF16);
      break;
    default:
      unreachable();
  }
}
