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

export const TILE_ROWS = 4;

/** Scratch bytes one thread needs to decode a tile of four rows of `cols` (f32 rows for F16 / BF16 are the larger). */
export function tileScratchBytes(cols: i32): i32 {
  const blocks = cols / 32;
  return TILE_ROWS * cols * 4 + TILE_ROWS * blocks * 16 + 32;
}

/** Lane k = the sum of v_k's four lanes: four horizontal sums in six shuffles and three adds. */
function sumLanes4(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
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
    let a0 = i32x4.splat(0);
    let a1 = i32x4.splat(0);
    let a2 = i32x4.splat(0);
    let a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0);
    let b1 = i32x4.splat(0);
    let b2 = i32x4.splat(0);
    let b3 = i32x4.splat(0);
    for (let c: usize = 0; c < 64; c += 16) {
      const xa = v128.load(xq + c);
      const xb = v128.load(xq2 + c);
      let wv = v128.load(p0 + c);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wv, xa));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wv, xb));
      wv = v128.load(p1 + c);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wv, xa));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wv, xb));
      wv = v128.load(p2 + c);
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wv, xa));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wv, xb));
      wv = v128.load(p3 + c);
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wv, xa));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wv, xb));
    }
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

/** Four f32 rows (w [4][cols]) · one f32 row x: lane k = row k's dot product. */
export function dotF32x4(w: usize, x: usize, cols: i32): v128 {
  const rowBytes = <usize>cols * 4;
  let p0 = w;
  let p1 = w + rowBytes;
  let p2 = p1 + rowBytes;
  let p3 = p2 + rowBytes;
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  let c = 0;
  for (; c + 4 <= cols; c += 4) {
    const v = v128.load(x);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(p0), v));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(p1), v));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(p2), v));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(p3), v));
    p0 += 16;
    p1 += 16;
    p2 += 16;
    p3 += 16;
    x += 16;
  }
  let sums = sumLanes4f(a0, a1, a2, a3);
  for (; c < cols; c++) {
    const v = load<f32>(x);
    let tail = f32x4.splat(load<f32>(p0));
    tail = f32x4.replace_lane(tail, 1, load<f32>(p1));
    tail = f32x4.replace_lane(tail, 2, load<f32>(p2));
    tail = f32x4.replace_lane(tail, 3, load<f32>(p3));
    sums = f32x4.add(sums, f32x4.mul(tail, f32x4.splat(v)));
    p0 += 4;
    p1 += 4;
    p2 += 4;
    p3 += 4;
    x += 4;
  }
  return sums;
}
