// Entry of kernels.wasm. Every function works on addresses in the one shared
// memory the host imports; the module allocates nothing itself, so any number
// of instances (one per worker thread) can run on the same memory at once.
// Its only static data (below heapBase: Math.exp's constant table) is written
// by each instantiation with the same bytes, so re-writing it is harmless.

import { dotBF16, dotF16, dotF32, dotQ4_0, dotQ4_K, dotQ6_K, dotQ8_0 } from "./dot";
import { decodeHalves, decodeQ4_0, decodeQ4_K, decodeQ6_K, decodeQ8_0, dotDecoded, minimumsTerm } from "./decode";
export { quantizeActivations } from "./quantize";
export { attention } from "./attention";
export { gatedActivation } from "./activation";

// ggml type ids (GgmlType in src/kernels/types.ts).
const F32 = 0;
const F16 = 1;
const Q4_0 = 2;
const Q8_0 = 8;
const Q4_K = 12;
const Q6_K = 14;
const BF16 = 30;

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
      return (cols / 32) * 34;
    case Q4_0:
      return (cols / 32) * 18;
    case Q4_K:
      return (cols / 256) * 144;
    case Q6_K:
      return (cols / 256) * 210;
    default:
      return 0;
  }
}

/** Scratch bytes one thread needs to decode a row of `cols` (see matmul's `scratch`). */
export function decodeScratchBytes(cols: i32): i32 {
  return cols * 4 + (cols / 32) * 8;
}

/**
 * out[b, r] = W[r, :] · x[b, :] for rowStart <= r < rowEnd and b < batch.
 * w: [rows, rowBytes] in the stored encoding; out: [batch, rows] f32.
 * Float types read x: [batch, cols] f32; quantized types read the quantized
 * activations xq: [batch, cols] i16 and xd, xs, xb: [batch, cols / 32] f32
 * (see quantize.ts). With batch > 1, each row is first decoded (decode.ts)
 * into this thread's `scratch` of decodeScratchBytes(cols) bytes.
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
): void {
  if (batch > 1 && type != F32) {
    matmulDecoded(type, out, w, rows, cols, x, xq, xd, xs, batch, scratch, rowStart, rowEnd);
    return;
  }
  const stride = <usize>rowBytes(type, cols);
  const blocks = cols / 32;
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
        case Q4_K:
          value = dotQ4_K(row, xq + xOffset * 2, xd + blockOffset, xs + blockOffset, cols / 256);
          break;
        case Q6_K:
          value = dotQ6_K(row, xq + xOffset * 2, xd + blockOffset, cols / 256);
          break;
        case F32:
          value = dotF32(row, x + xOffset * 4, cols);
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
      store<f32>(out + ((<usize>b * <usize>rows + <usize>r) << 2), value);
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
  batch: i32,
  scratch: usize,
  rowStart: i32,
  rowEnd: i32,
): void {
  const stride = <usize>rowBytes(type, cols);
  const blocks = cols / 32;
  // scratch: q16 [cols] i16 | scales [blocks] f32 | mins [blocks] f32; or, for F16 / BF16, [cols] f32.
  const scales = scratch + <usize>cols * 2;
  const mins = scales + <usize>blocks * 4;
  for (let r = rowStart; r < rowEnd; r++) {
    const row = w + <usize>r * stride;
    const halves = type == F16 || type == BF16;
    switch (type) {
      case Q8_0:
        decodeQ8_0(row, blocks, scratch, scales, mins);
        break;
      case Q4_0:
        decodeQ4_0(row, blocks, scratch, scales, mins);
        break;
      case Q4_K:
        decodeQ4_K(row, cols / 256, scratch, scales, mins);
        break;
      case Q6_K:
        decodeQ6_K(row, cols / 256, scratch, scales, mins);
        break;
      case F16:
      case BF16:
        decodeHalves(row, cols, scratch, type == BF16);
        break;
      default:
        unreachable();
    }
    for (let b = 0; b < batch; b++) {
      const xOffset = <usize>b * <usize>cols; // elements
      const blockOffset = <usize>b * <usize>blocks * 4;
      let value: f32;
      if (halves) value = dotF32(scratch, x + xOffset * 4, cols);
      else {
        value = dotDecoded(scratch, scales, xq + xOffset * 2, xd + blockOffset, blocks);
        if (type == Q4_K) value -= minimumsTerm(mins, xs + blockOffset, blocks);
      }
      store<f32>(out + ((<usize>b * <usize>rows + <usize>r) << 2), value);
    }
  }
}
