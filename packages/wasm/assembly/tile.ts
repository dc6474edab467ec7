// Batched matmul (prefill) on tiles of four weight rows: the four rows are
// decoded once (decode.ts) and every activation row is dotted with all four at
// a time. Each activation vector loaded then feeds four multiplies instead of
// one, and the per-block float work (int-to-float, the scales, the add) runs
// once per block for four rows, on one vector whose lane k is row k's sum.
//
// Decoded tile layout in a thread's scratch (see tileScratchBytes):
//   q16:    [4][cols] i16      (quantized types) or [4][cols] f32 (F16 / BF16)
//   scales: [4][blocks] f32, mins: [4][blocks] f32   (as decode.ts writes them)
//   scales4, mins4: [blocks][4] f32                  (the same, lane k = row k)
//   pair:   2 x f32x4                                (dotDecoded4x2's results)

import { halfToFloat, halvesToFloats } from "./half";

export const TILE_ROWS = 4;

/** Scratch bytes one thread needs to decode a tile of four rows of `cols` (f32 rows for F16 / BF16 are the larger). */
export function tileScratchBytes(cols: i32): i32 {
  const blocks = cols / 32;
  return TILE_ROWS * cols * 4 + TILE_ROWS * blocks * 16 + 32;
}

/** Lane k = the sum of v_k's four lanes: four horizontal sums in six shuffles and three adds. */
export function sumLanes4(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const u0 = i32x4.add(i32x4.shuffle(v0, v1, 0, 4, 1, 5), i32x4.shuffle(v0, v1, 2, 6, 3, 7));
  const u1 = i32x4.add(i32x4.shuffle(v2, v3, 0, 4, 1, 5), i32x4.shuffle(v2, v3, 2, 6, 3, 7));
  return i32x4.add(i32x4.shuffle(u0, u1, 0, 1, 4, 5), i32x4.shuffle(u0, u1, 2, 3, 6, 7));
}

/** As sumLanes4, in f32 lanes. */
function sumLanes4f(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const u0 = f32x4.add(i32x4.shuffle(v0, v1, 0, 4, 1, 5), i32x4.shuffle(v0, v1, 2, 6, 3, 7));
  const u1 = f32x4.add(i32x4.shuffle(v2, v3, 0, 4, 1, 5), i32x4.shuffle(v2, v3, 2, 6, 3, 7));
  return f32x4.add(i32x4.shuffle(u0, u1, 0, 1, 4, 5), i32x4.shuffle(u0, u1, 2, 3, 6, 7));
}

/** Rewrites the four rows' per-block values [4][blocks] as [blocks][4]. */
export function interleave4(rowsValues: usize, blocks: i32, out: usize): void {
  const stride = <usize>blocks * 4;
  for (let i = 0; i < blocks; i++) {
    const at = rowsValues + (<usize>i << 2);
    store<f32>(out, load<f32>(at));
    store<f32>(out, load<f32>(at + stride), 4);
    store<f32>(out, load<f32>(at + 2 * stride), 8);
    store<f32>(out, load<f32>(at + 3 * stride), 12);
    out += 16;
  }
}

/**
 * Four decoded quantized rows (q16 [4][cols] i16, scales4 [blocks][4]) · two
 * activation rows (int16 xq and xq2 with per-block scales xd and xd2), each
 * weight vector loaded feeding both: writes f32x4 at outA and outB, lane k =
 * row k's dot product, without Q4_K's minimums (minimumsTerm4).
 */
export function dotDecoded4x2(q16: usize, scales4: usize, xq: usize, xd: usize, xq2: usize, xd2: usize, blocks: i32, outA: usize, outB: usize): void {
  const rowBytes = <usize>blocks * 64;
  let p0 = q16;
  let p1 = q16 + rowBytes;
  let p2 = p1 + rowBytes;
  let p3 = p2 + rowBytes;
  let accA = f32x4.splat(0);
  let accB = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    // The block's four 8-element steps written out, with constant offsets: V8
    // then folds each offset into its load's address and checks no loop edge.
    let xa = v128.load(xq, 0);
    let xb = v128.load(xq2, 0);
    let wv: v128;
    wv = v128.load(p0, 0);
    let a0 = i32x4.dot_i16x8_s(wv, xa);
    let b0 = i32x4.dot_i16x8_s(wv, xb);
    wv = v128.load(p1, 0);
    let a1 = i32x4.dot_i16x8_s(wv, xa);
    let b1 = i32x4.dot_i16x8_s(wv, xb);
    wv = v128.load(p2, 0);
    let a2 = i32x4.dot_i16x8_s(wv, xa);
    let b2 = i32x4.dot_i16x8_s(wv, xb);
    wv = v128.load(p3, 0);
    let a3 = i32x4.dot_i16x8_s(wv, xa);
    let b3 = i32x4.dot_i16x8_s(wv, xb);
    xa = v128.load(xq, 16);
    xb = v128.load(xq2, 16);
    wv = v128.load(p0, 16);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wv, xa));
    b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p1, 16);
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wv, xa));
    b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p2, 16);
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wv, xa));
    b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p3, 16);
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wv, xa));
    b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wv, xb));
    xa = v128.load(xq, 32);
    xb = v128.load(xq2, 32);
    wv = v128.load(p0, 32);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wv, xa));
    b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p1, 32);
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wv, xa));
    b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p2, 32);
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wv, xa));
    b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p3, 32);
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wv, xa));
    b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wv, xb));
    xa = v128.load(xq, 48);
    xb = v128.load(xq2, 48);
    wv = v128.load(p0, 48);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wv, xa));
    b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p1, 48);
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wv, xa));
    b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p2, 48);
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wv, xa));
    b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wv, xb));
    wv = v128.load(p3, 48);
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wv, xa));
    b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wv, xb));
    const scales = v128.load(scales4);
    accA = f32x4.add(accA, f32x4.mul(f32x4.convert_i32x4_s(sumLanes4(a0, a1, a2, a3)), f32x4.mul(scales, f32x4.splat(load<f32>(xd)))));
    accB = f32x4.add(accB, f32x4.mul(f32x4.convert_i32x4_s(sumLanes4(b0, b1, b2, b3)), f32x4.mul(scales, f32x4.splat(load<f32>(xd2)))));
    p0 += 64;
    p1 += 64;
    p2 += 64;
    p3 += 64;
    xq += 64;
    xq2 += 64;
    scales4 += 16;
    xd += 4;
    xd2 += 4;
  }
  v128.store(outA, accA);
  v128.store(outB, accB);
}

/** sum over blocks of mins4[i] * xs[i], lane k for row k: what four decoded Q4_K rows' minimums subtract. */
export function minimumsTerm4(mins4: usize, xs: usize, blocks: i32): v128 {
  let acc = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    acc = f32x4.add(acc, f32x4.mul(v128.load(mins4), f32x4.splat(load<f32>(xs))));
    mins4 += 16;
    xs += 4;
  }
  return acc;
}

/** Four elements at p, f32 (T = f32) or f16 bits (T = u16), as f32x4. */
export function load4<T>(p: usize): v128 {
  if (sizeof<T>() == 2) return halvesToFloats(i32x4.extend_low_i16x8_u(v128.load64_zero(p)));
  return v128.load(p);
}

/** One element at p, f32 or f16 bits, as f32. */
export function load1<T>(p: usize): f32 {
  if (sizeof<T>() == 2) return halfToFloat(<u32>load<u16>(p));
  return load<f32>(p);
}

/** Lane k = q · (the row at k0 + k * stride) over `count` elements: four rows per pass over q. */
export function dotRows4<T>(q: usize, k0: usize, stride: usize, count: i32): v128 {
  const k1 = k0 + stride;
  const k2 = k1 + stride;
  const k3 = k2 + stride;
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= count; i += 4) {
    const o = <usize>i * sizeof<T>();
    const x = v128.load(q + (<usize>i << 2));
    a0 = f32x4.add(a0, f32x4.mul(x, load4<T>(k0 + o)));
    a1 = f32x4.add(a1, f32x4.mul(x, load4<T>(k1 + o)));
    a2 = f32x4.add(a2, f32x4.mul(x, load4<T>(k2 + o)));
    a3 = f32x4.add(a3, f32x4.mul(x, load4<T>(k3 + o)));
  }
  let sums = sumLanes4f(a0, a1, a2, a3);
  for (; i < count; i++) {
    const o = <usize>i * sizeof<T>();
    let k = f32x4.splat(load1<T>(k0 + o));
    k = f32x4.replace_lane(k, 1, load1<T>(k1 + o));
    k = f32x4.replace_lane(k, 2, load1<T>(k2 + o));
    k = f32x4.replace_lane(k, 3, load1<T>(k3 + o));
    sums = f32x4.add(sums, f32x4.mul(f32x4.splat(load<f32>(q + (<usize>i << 2))), k));
  }
  return sums;
}
