// Batched matmul (prefill) on tiles of four weight rows: the four rows are
// decoded once (decode.ts) and packed (packTile), then every activation row is
// dotted with all four at a time, four activation rows per pass. Each
// activation vector loaded then feeds four multiplies, and the per-block float
// work (int-to-float, the scales, the add) runs once per block for four rows,
// on one vector whose lane k is row k's sum.
//
// Decoded tile layout in a thread's scratch (see tileScratchBytes):
//   q16:    [4][cols] i16      (quantized types) or [4][cols] f32 (F16 / BF16)
//   scales: [4][blocks] f32, mins: [4][blocks] f32   (as decode.ts writes them)
//   mins4: [blocks][4] f32                           (the mins, lane k = row k: Q4_K)
//   results: 4 x f32x4                               (dotPackedTile's, one per activation row)
//   packed: [blocks] x { scales f32[4], row 0..3 quants i16[32] each } (packTile), or for
//           F16 / BF16 [cols / 4] x { row 0..3 f32[4] each } (packRowsF32)

import { NibbleBlock } from "./nibbles";

export const TILE_ROWS = 4;

/** Bytes of one block of a packed tile: the four rows' scales, then the four rows' 32 int16 quants. */
export const PACKED_BLOCK_BYTES = 16 + TILE_ROWS * 64;

/** Scratch bytes one thread needs to decode a tile of four rows of `cols` (f32 rows for F16 / BF16 are the larger). */
export function tileScratchBytes(cols: i32): i32 {
  const blocks = cols / 32;
  // The packed region holds a packed tile or, for F16 / BF16, four packed f32 rows (cols * 16 bytes, the larger).
  return TILE_ROWS * cols * 4 + TILE_ROWS * blocks * 12 + 64 + cols * 16;
}

/** Lane k = the sum of v_k's four lanes: four horizontal sums in six shuffles and three adds. */
export function sumLanes4(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
  const u0 = i32x4.add(i32x4.shuffle(v0, v1, 0, 4, 1, 5), i32x4.shuffle(v0, v1, 2, 6, 3, 7));
  const u1 = i32x4.add(i32x4.shuffle(v2, v3, 0, 4, 1, 5), i32x4.shuffle(v2, v3, 2, 6, 3, 7));
  return i32x4.add(i32x4.shuffle(u0, u1, 0, 1, 4, 5), i32x4.shuffle(u0, u1, 2, 3, 6, 7));
}

/** As sumLanes4, in f32 lanes. */
export function sumLanes4f(v0: v128, v1: v128, v2: v128, v3: v128): v128 {
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
 * Four decoded rows (q16 [4][cols] i16, their scales [4][blocks] f32) rewritten
 * as a packed tile: per block, the four scales, then each row's 32 quants. One
 * pointer with constant offsets then reaches everything a block needs, which
 * leaves V8 registers for the four activation rows of dotPackedTile.
 */
export function packTile(q16: usize, scales: usize, blocks: i32, packed: usize): void {
  const rowBytes = <usize>blocks * 64;
  const rowScales = <usize>blocks * 4;
  for (let i = 0; i < blocks; i++) {
    store<f32>(packed, load<f32>(scales));
    store<f32>(packed, load<f32>(scales + rowScales), 4);
    store<f32>(packed, load<f32>(scales + 2 * rowScales), 8);
    store<f32>(packed, load<f32>(scales + 3 * rowScales), 12);
    for (let k = 0; k < TILE_ROWS; k++) {
      const from = q16 + <usize>k * rowBytes;
      const to = packed + 16 + <usize>k * 64;
      v128.store(to, v128.load(from), 0);
      v128.store(to, v128.load(from, 16), 16);
      v128.store(to, v128.load(from, 32), 32);
      v128.store(to, v128.load(from, 48), 48);
    }
    packed += PACKED_BLOCK_BYTES;
    q16 += 64;
    scales += 4;
  }
}

/**
 * The packed tile's per-block steps, as static members so that they can be
 * marked @inline (eslint's TypeScript parser accepts decorators on class
 * members only): dotPackedTile calls them four times per block, and as calls
 * they cost it half its speed.
 */
class PackedBlock {
  /**
   * One packed block at p · one activation block (32 int16 at x): lane k = row k's
   * integer sum. Written out with constant offsets: V8 then folds each into its
   * load's address and checks no loop edge.
   */
  @inline static sums(p: usize, x: usize): v128 {
    let xv = v128.load(x, 0);
    let a0 = i32x4.dot_i16x8_s(v128.load(p, 16), xv);
    let a1 = i32x4.dot_i16x8_s(v128.load(p, 80), xv);
    let a2 = i32x4.dot_i16x8_s(v128.load(p, 144), xv);
    let a3 = i32x4.dot_i16x8_s(v128.load(p, 208), xv);
    xv = v128.load(x, 16);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.load(p, 32), xv));
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(v128.load(p, 96), xv));
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(v128.load(p, 160), xv));
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(v128.load(p, 224), xv));
    xv = v128.load(x, 32);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.load(p, 48), xv));
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(v128.load(p, 112), xv));
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(v128.load(p, 176), xv));
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(v128.load(p, 240), xv));
    xv = v128.load(x, 48);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.load(p, 64), xv));
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(v128.load(p, 128), xv));
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(v128.load(p, 192), xv));
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(v128.load(p, 256), xv));
    return sumLanes4(a0, a1, a2, a3);
  }

  /**
   * One packed block at p · one activation block at x (block scale xd; quant sum
   * at xb, which only nibble rows read) added to acc: lane k += row k's sum * scale[k] * xd.
   * T: i16 for packTile's rows, u8 for the relaxed build's nibble rows (nibbles.ts).
   */
  @inline static accumulate<T>(acc: v128, p: usize, x: usize, xd: f32, xb: usize): v128 {
    if (sizeof<T>() == 1) return NibbleBlock.accumulate(acc, p, x, xd, load<f32>(xb));
    return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(PackedBlock.sums(p, x)), f32x4.mul(v128.load(p), f32x4.splat(xd))));
  }
}

/**
 * A packed tile · `count` (1..4) consecutive activation rows from xq (int16,
 * rows of blocks * 32) with block scales xd and quant sums xb: writes f32x4 per
 * activation row at results, lane k = row k's dot product, without Q4_K's
 * minimums (minimumsTerm4). T: i16 for packTile's int16 rows, u8 for the
 * relaxed build's nibble rows (nibbles.ts's packNibbleTile). Four rows go
 * through together, each packed block loaded once for all four (V8 keeps the
 * block's weights and reloads them from its stack rather than from the tile:
 * still cheaper than four passes); any other count one row at a time, with the
 * same arithmetic per row, so a row's bits do not depend on how the batch divides.
 */
export function dotPackedTile<T>(packed: usize, xq: usize, xd: usize, xb: usize, blocks: i32, count: i32, results: usize): void {
  const blockBytes: usize = 16 + TILE_ROWS * 32 * sizeof<T>();
  const xRow = <usize>blocks * 64;
  const sRow = <usize>blocks * 4; // bytes of a row's xd or xb
  if (count == 4) {
    let acc0 = f32x4.splat(0);
    let acc1 = acc0;
    let acc2 = acc0;
    let acc3 = acc0;
    for (let i = 0; i < blocks; i++) {
      acc0 = PackedBlock.accumulate<T>(acc0, packed, xq, load<f32>(xd), xb);
      acc1 = PackedBlock.accumulate<T>(acc1, packed, xq + xRow, load<f32>(xd + sRow), xb + sRow);
      acc2 = PackedBlock.accumulate<T>(acc2, packed, xq + 2 * xRow, load<f32>(xd + 2 * sRow), xb + 2 * sRow);
      acc3 = PackedBlock.accumulate<T>(acc3, packed, xq + 3 * xRow, load<f32>(xd + 3 * sRow), xb + 3 * sRow);
      packed += blockBytes;
      xq += 64;
      xd += 4;
      xb += 4;
    }
    v128.store(results, acc0, 0);
    v128.store(results, acc1, 16);
    v128.store(results, acc2, 32);
    v128.store(results, acc3, 48);
    return;
  }
  for (let r = 0; r < count; r++) {
    let p = packed;
    let x = xq + <usize>r * xRow;
    let d = xd + <usize>r * sRow;
    let b = xb + <usize>r * sRow;
    let acc = f32x4.splat(0);
    for (let i = 0; i < blocks; i++) {
      acc = PackedBlock.accumulate<T>(acc, p, x, load<f32>(d), b);
      p += blockBytes;
      x += 64;
      d += 4;
      b += 4;
    }
    v128.store(results + (<usize>r << 4), acc);
  }
}

/**
 * Four decoded f32 rows ([4][cols] at rows, F16 / BF16 widened by decode.ts)
 * packed for dotPackedRowsF32x2: per chunk of four elements, the four rows' four
 * floats side by side, [cols / 4][4][4] f32 (the last cols % 4 stay in rows).
 */
export function packRowsF32(rows: usize, cols: i32, packed: usize): void {
  const rowBytes = <usize>cols << 2;
  for (let i = 0; i + 4 <= cols; i += 4) {
    const from = rows + (<usize>i << 2);
    v128.store(packed, v128.load(from), 0);
    v128.store(packed, v128.load(from + rowBytes), 16);
    v128.store(packed, v128.load(from + 2 * rowBytes), 32);
    v128.store(packed, v128.load(from + 3 * rowBytes), 48);
    packed += 64;
  }
}

/**
 * Packed f32 rows (packRowsF32) · two f32 activation rows xa and xb: f32x4 at
 * outA and outB, lane k = row k's dot product. Each row and activation row
 * accumulates its chunks in order into one vector, summed across lanes at the
 * end, then the last cols % 4 elements from the unpacked rows (the arithmetic
 * of attention.ts's dotRows4), with each loaded weight vector feeding two
 * products. (Four chunks per loop pass, written out, measured 0.87 x this loop:
 * V8 spills the eight accumulators' inputs.)
 */
export function dotPackedRowsF32x2(packed: usize, rows: usize, cols: i32, xa: usize, xb: usize, outA: usize, outB: usize): void {
  let a0 = f32x4.splat(0);
  let a1 = a0;
  let a2 = a0;
  let a3 = a0;
  let b0 = a0;
  let b1 = a0;
  let b2 = a0;
  let b3 = a0;
  let i = 0;
  let p = packed;
  for (; i + 4 <= cols; i += 4) {
    const xv = v128.load(xa + (<usize>i << 2));
    const yv = v128.load(xb + (<usize>i << 2));
    a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(p)));
    b0 = f32x4.add(b0, f32x4.mul(yv, v128.load(p)));
    a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(p, 16)));
    b1 = f32x4.add(b1, f32x4.mul(yv, v128.load(p, 16)));
    a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(p, 32)));
    b2 = f32x4.add(b2, f32x4.mul(yv, v128.load(p, 32)));
    a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(p, 48)));
    b3 = f32x4.add(b3, f32x4.mul(yv, v128.load(p, 48)));
    p += 64;
  }
  let sumsA = sumLanes4f(a0, a1, a2, a3);
  let sumsB = sumLanes4f(b0, b1, b2, b3);
  const rowBytes = <usize>cols << 2;
  for (; i < cols; i++) {
    const o = <usize>i << 2;
    let k = f32x4.splat(load<f32>(rows + o));
    k = f32x4.replace_lane(k, 1, load<f32>(rows + rowBytes + o));
    k = f32x4.replace_lane(k, 2, load<f32>(rows + 2 * rowBytes + o));
    k = f32x4.replace_lane(k, 3, load<f32>(rows + 3 * rowBytes + o));
    sumsA = f32x4.add(sumsA, f32x4.mul(f32x4.splat(load<f32>(xa + o)), k));
    sumsB = f32x4.add(sumsB, f32x4.mul(f32x4.splat(load<f32>(xb + o)), k));
  }
  v128.store(outA, sumsA);
  v128.store(outB, sumsB);
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

/**
 * minimumsTerm4 with the activations' quantized sums, xd[i] * xb[i] (scale times
 * quant sum), in place of their float sums: what four decoded Q4_1 or Q5_1 rows'
 * minimums subtract (legacy.ts).
 */
export function minimumsTerm4Quantized(mins4: usize, xd: usize, xb: usize, blocks: i32): v128 {
  let acc = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    acc = f32x4.add(acc, f32x4.mul(v128.load(mins4), f32x4.splat(load<f32>(xd) * load<f32>(xb))));
    mins4 += 16;
    xd += 4;
    xb += 4;
  }
  return acc;
}
