// Batched matmul (prefill) on tiles of four weight rows: the four rows are
// decoded once (decode.ts, or a whole interleaved group straight from
// interleave.ts) and "splat" (splatRows): each element pair (two int16) of each
// row repeated in all four lanes of a vector. The activations come four tokens
// to a vector (quantize.ts's interleaveTokens: lane j = token j's same pair), so
// one `i32x4.dot_i16x8_s` gives a row's partial sums for four tokens, lanes
// stay tokens to the end of a block and no horizontal sums are needed. Eight
// tokens go through at a time (dotSplatTile8): each weight vector loaded feeds
// two products, six loads per eight products, which is what bounds this loop
// on x64 (the four-by-four tile with horizontal sums that came before took
// twenty loads per sixteen, half of them V8's reloads from its stack).
//
// Scratch of one thread (tileScratchBytes):
//   q16:    [4][cols] i16      (quantized types) or [4][cols] f32 (F16 / BF16)
//   scales: [4][blocks] f32, mins: [4][blocks] f32   (as decode.ts writes them)
//   mins4: [blocks][4] f32                           (the mins, lane k = row k: Q4_K)
//   results: 8 x f32x4                               (one per token, lane k = row k)
//   sums: 8 x f32x4                                  (dotSplatTile8's running sums)
//   tile: [blocks] x { scales: row 0..3's scale x4, then pair 0..15 x row 0..3: the pair x4 }
//         (SPLAT_BLOCK_BYTES each), or for F16 / BF16 [cols / 4] x { row 0..3 f32[4] each } (packRowsF32)

export const TILE_ROWS = 4;

/** Bytes of one block of a splat tile: four scale vectors, then 16 element pairs x four rows. */
export const SPLAT_BLOCK_BYTES = 64 + 16 * TILE_ROWS * 16;

/** Bytes of the results and of the running sums (8 x f32x4 each). */
const RESULTS_BYTES = 128;

/** Scratch bytes one thread needs to decode a tile of four rows of `cols` (f32 rows for F16 / BF16 are the larger). */
export function tileScratchBytes(cols: i32): i32 {
  const blocks = cols / 32;
  return TILE_ROWS * cols * 4 + TILE_ROWS * blocks * 12 + 2 * RESULTS_BYTES + max(cols * 16, blocks * SPLAT_BLOCK_BYTES);
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

/** Row k's 32 int16 quants of one block (four vectors at q) into the splat block at tile: pair p at 64 + 64 p + 16 k. */
export function splatQuants(q: usize, k: i32, tile: usize): void {
  let at = tile + 64 + 16 * <usize>k;
  for (let v = 0; v < 4; v++) {
    const pairs = v128.load(q + (<usize>v << 4));
    v128.store(at, i32x4.shuffle(pairs, pairs, 0, 0, 0, 0), 0);
    v128.store(at, i32x4.shuffle(pairs, pairs, 1, 1, 1, 1), 64);
    v128.store(at, i32x4.shuffle(pairs, pairs, 2, 2, 2, 2), 128);
    v128.store(at, i32x4.shuffle(pairs, pairs, 3, 3, 3, 3), 192);
    at += 256;
  }
}

/** A block's four row scales (one f32x4, lane k = row k) as the splat block's four scale vectors. */
export function splatScales(scales: v128, tile: usize): void {
  v128.store(tile, i32x4.shuffle(scales, scales, 0, 0, 0, 0), 0);
  v128.store(tile, i32x4.shuffle(scales, scales, 1, 1, 1, 1), 16);
  v128.store(tile, i32x4.shuffle(scales, scales, 2, 2, 2, 2), 32);
  v128.store(tile, i32x4.shuffle(scales, scales, 3, 3, 3, 3), 48);
}

/** Four decoded rows (q16 [4][cols] i16, their scales [4][blocks] f32) as a splat tile. */
export function splatRows(q16: usize, scales: usize, blocks: i32, tile: usize): void {
  const rowBytes = <usize>blocks * 64;
  const rowScales = <usize>blocks * 4;
  for (let i = 0; i < blocks; i++) {
    let v = f32x4.splat(load<f32>(scales));
    v = f32x4.replace_lane(v, 1, load<f32>(scales + rowScales));
    v = f32x4.replace_lane(v, 2, load<f32>(scales + 2 * rowScales));
    v = f32x4.replace_lane(v, 3, load<f32>(scales + 3 * rowScales));
    splatScales(v, tile);
    for (let k = 0; k < TILE_ROWS; k++) splatQuants(q16 + <usize>k * rowBytes, k, tile);
    tile += SPLAT_BLOCK_BYTES;
    q16 += 64;
    scales += 4;
  }
}

/** A static member so that it can be marked @inline (eslint's TypeScript parser accepts decorators on class members only). */
class Block {
  /** One block's integer sums of one row (lanes = tokens) times its scale and the tokens' block scales, added to acc. */
  @inline static scaled(acc: v128, sums: v128, scale: v128, xd: v128): v128 {
    return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(sums), f32x4.mul(scale, xd)));
  }
}

/**
 * A splat tile · eight tokens: two four-token groups of interleaved activations
 * (quantize.ts's interleaveTokens), xq4 and xq4 + groupBytes, with their block
 * scales xd4 and xd4 + scaleBytes. Writes f32x4 per token at results, lane k = row
 * k's dot product, without the minimums (minimumsTerm4). Per row and token the
 * arithmetic is the one-row dot product's: a block's exact integer sum, times
 * (row scale * token scale), added in block order; so is dotSplatTile's, and a
 * token's bits do not depend on which of the two, or which lanes, it went through.
 * The running float sums live in `sums` (8 x f32x4 of scratch): with the eight
 * integer sums and three operands they would not fit V8's fifteen vector registers.
 */
export function dotSplatTile8(tile: usize, xq4: usize, xd4: usize, blocks: i32, groupBytes: usize, scaleBytes: usize, results: usize, sums: usize): void {
  const zero = f32x4.splat(0);
  for (let k: usize = 0; k < 8; k++) v128.store(sums + (k << 4), zero);
  let xa = xq4;
  let xb = xq4 + groupBytes;
  let da = xd4;
  let db = xd4 + scaleBytes;
  for (let i = 0; i < blocks; i++) {
    let s0 = i32x4.splat(0);
    let s1 = s0;
    let s2 = s0;
    let s3 = s0;
    let s4 = s0;
    let s5 = s0;
    let s6 = s0;
    let s7 = s0;
    // A loop, not sixteen pairs written out: V8 then schedules each pair's loads next to
    // their products (written out, it hoisted the loads and spilled: 0.62 x).
    let t = tile + 64;
    for (let p = 0; p < 16; p++) {
      const va = v128.load(xa);
      const vb = v128.load(xb);
      let w = v128.load(t, 0);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(w, va));
      s4 = i32x4.add(s4, i32x4.dot_i16x8_s(w, vb));
      w = v128.load(t, 16);
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(w, va));
      s5 = i32x4.add(s5, i32x4.dot_i16x8_s(w, vb));
      w = v128.load(t, 32);
      s2 = i32x4.add(s2, i32x4.dot_i16x8_s(w, va));
      s6 = i32x4.add(s6, i32x4.dot_i16x8_s(w, vb));
      w = v128.load(t, 48);
      s3 = i32x4.add(s3, i32x4.dot_i16x8_s(w, va));
      s7 = i32x4.add(s7, i32x4.dot_i16x8_s(w, vb));
      t += 64;
      xa += 16;
      xb += 16;
    }
    const dA = v128.load(da);
    const dB = v128.load(db);
    let scale = v128.load(tile, 0);
    v128.store(sums, Block.scaled(v128.load(sums, 0), s0, scale, dA), 0);
    v128.store(sums, Block.scaled(v128.load(sums, 64), s4, scale, dB), 64);
    scale = v128.load(tile, 16);
    v128.store(sums, Block.scaled(v128.load(sums, 16), s1, scale, dA), 16);
    v128.store(sums, Block.scaled(v128.load(sums, 80), s5, scale, dB), 80);
    scale = v128.load(tile, 32);
    v128.store(sums, Block.scaled(v128.load(sums, 32), s2, scale, dA), 32);
    v128.store(sums, Block.scaled(v128.load(sums, 96), s6, scale, dB), 96);
    scale = v128.load(tile, 48);
    v128.store(sums, Block.scaled(v128.load(sums, 48), s3, scale, dA), 48);
    v128.store(sums, Block.scaled(v128.load(sums, 112), s7, scale, dB), 112);
    tile += SPLAT_BLOCK_BYTES;
    da += 16;
    db += 16;
  }
  transposeRows4(v128.load(sums, 0), v128.load(sums, 16), v128.load(sums, 32), v128.load(sums, 48), results);
  transposeRows4(v128.load(sums, 64), v128.load(sums, 80), v128.load(sums, 96), v128.load(sums, 112), results + 64);
}

/** dotSplatTile8 for one group of four tokens (a batch's last one to four): the same arithmetic per token. */
export function dotSplatTile(tile: usize, xq4: usize, xd4: usize, blocks: i32, results: usize): void {
  let acc0 = f32x4.splat(0);
  let acc1 = acc0;
  let acc2 = acc0;
  let acc3 = acc0;
  for (let i = 0; i < blocks; i++) {
    let s0 = i32x4.splat(0);
    let s1 = s0;
    let s2 = s0;
    let s3 = s0;
    let t = tile + 64;
    for (let p = 0; p < 16; p++) {
      const va = v128.load(xq4);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(v128.load(t, 0), va));
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(v128.load(t, 16), va));
      s2 = i32x4.add(s2, i32x4.dot_i16x8_s(v128.load(t, 32), va));
      s3 = i32x4.add(s3, i32x4.dot_i16x8_s(v128.load(t, 48), va));
      t += 64;
      xq4 += 16;
    }
    const d = v128.load(xd4);
    acc0 = Block.scaled(acc0, s0, v128.load(tile, 0), d);
    acc1 = Block.scaled(acc1, s1, v128.load(tile, 16), d);
    acc2 = Block.scaled(acc2, s2, v128.load(tile, 32), d);
    acc3 = Block.scaled(acc3, s3, v128.load(tile, 48), d);
    tile += SPLAT_BLOCK_BYTES;
    xd4 += 16;
  }
  transposeRows4(acc0, acc1, acc2, acc3, results);
}

/** Four vectors of four 32-bit lanes stored transposed: vector j at `to` holds lane j of r0..r3. */
export function transposeRows4(r0: v128, r1: v128, r2: v128, r3: v128, to: usize): void {
  const t0 = i32x4.shuffle(r0, r1, 0, 4, 1, 5);
  const t1 = i32x4.shuffle(r0, r1, 2, 6, 3, 7);
  const t2 = i32x4.shuffle(r2, r3, 0, 4, 1, 5);
  const t3 = i32x4.shuffle(r2, r3, 2, 6, 3, 7);
  v128.store(to, i32x4.shuffle(t0, t2, 0, 1, 4, 5), 0);
  v128.store(to, i32x4.shuffle(t0, t2, 2, 3, 6, 7), 16);
  v128.store(to, i32x4.shuffle(t1, t3, 0, 1, 4, 5), 32);
  v128.store(to, i32x4.shuffle(t1, t3, 2, 3, 6, 7), 48);
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
