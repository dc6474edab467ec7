// Batched matmul (prefill) on tiles of four weight rows: the four rows are
// decoded once (decode.ts, or a whole interleaved group straight from
// interleave.ts) and packed per block (packTile), then the tokens go through.
//
// Eight at a time while seven or more are left (dotPackedTile8): each element
// pair (two int16) of a row is splat across a vector as it is loaded
// (`v128.load32_splat`), and the activations come four tokens to a vector
// (quantize.ts's interleaveTokens: lane j = token j's same pair), so one
// `i32x4.dot_i16x8_s` gives a row's partial sums for four tokens and lanes stay
// tokens to the end of a block: no horizontal sums, and each weight vector
// feeds two products, six loads per eight products. The rest (and a batch of a
// few tokens, as a decode step of several sequences) four at a time or alone
// (dotPackedTile): each activation vector feeds the four rows and lanes are
// rows, summed across at the end of each block; twenty loads per sixteen
// products, half of them V8's reloads of the block from its stack. Per token
// the 8-token pass is the faster one, for every weight type, but it computes
// its padding lanes too, so it pays only from seven tokens.
// Both give a row and token the one-row dot product's arithmetic: a block's exact
// integer sum times (row scale * token scale), added in block order; a token's
// bits do not depend on which pass it went through.
//
// Scratch of one thread (tileScratchBytes):
//   q16:    [4][cols] i16      (quantized types) or [4][cols] f32 (F16 / BF16)
//   scales: [4][blocks] f32, mins: [4][blocks] f32   (as decode.ts writes them)
//   mins4: [blocks][4] f32                           (the mins, lane k = row k: Q4_K)
//   results: 8 x f32x4                               (one per token, lane k = row k)
//   sums: 8 x f32x4                                  (dotPackedTile8's running sums)
//   packed: [blocks] x { scales f32[4], row 0..3 quants i16[32] each } (packTile), or for
//           F16 / BF16 [cols / 4] x { row 0..3 f32[4] each } (packRowsF32)

export const TILE_ROWS = 4;

/** Tokens left from which a batch goes through dotPackedTile8 (it computes its padding lanes too). */
export const EIGHT_TOKEN_PASS_FROM = 7;

/** Bytes of one block of a packed tile: the four rows' scales, then the four rows' 32 int16 quants. */
export const PACKED_BLOCK_BYTES = 16 + TILE_ROWS * 64;

/** Bytes of the results and of the running sums (8 x f32x4 each). */
const RESULTS_BYTES = 128;

/** Scratch bytes one thread needs to decode a tile of four rows of `cols` (f32 rows for F16 / BF16 are the larger). */
export function tileScratchBytes(cols: i32): i32 {
  const blocks = cols / 32;
  // The packed region holds a packed tile or, for F16 / BF16, four packed f32 rows (cols * 16 bytes, the larger).
  return TILE_ROWS * cols * 4 + TILE_ROWS * blocks * 12 + 2 * RESULTS_BYTES + cols * 16;
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

  /** One packed block at p · one activation block at x (block scale xd) added to acc: lane k += row k's sum * scale[k] * xd. */
  @inline static accumulate(acc: v128, p: usize, x: usize, xd: f32): v128 {
    return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(PackedBlock.sums(p, x)), f32x4.mul(v128.load(p), f32x4.splat(xd))));
  }

  /** One block's integer sums of one row (lanes = tokens) times its scale (splat) and the tokens' block scales, added to acc. */
  @inline static scaled(acc: v128, sums: v128, scale: v128, xd: v128): v128 {
    return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(sums), f32x4.mul(scale, xd)));
  }
}

/**
 * A packed tile · `count` (1..4) consecutive tokens' activations from xq (int16,
 * rows of blocks * 32) with block scales xd: writes f32x4 per token at results,
 * lane k = row k's dot product, without the minimums (minimumsTerm4). Four tokens
 * go through together, each packed block loaded once for all four (V8 keeps the
 * block's weights and reloads them from its stack rather than from the tile:
 * still cheaper than four passes); any other count one token at a time.
 */
export function dotPackedTile(packed: usize, xq: usize, xd: usize, blocks: i32, count: i32, results: usize): void {
  const xRow = <usize>blocks * 64;
  const sRow = <usize>blocks * 4; // bytes of a token's xd
  if (count == 4) {
    let acc0 = f32x4.splat(0);
    let acc1 = acc0;
    let acc2 = acc0;
    let acc3 = acc0;
    for (let i = 0; i < blocks; i++) {
      acc0 = PackedBlock.accumulate(acc0, packed, xq, load<f32>(xd));
      acc1 = PackedBlock.accumulate(acc1, packed, xq + xRow, load<f32>(xd + sRow));
      acc2 = PackedBlock.accumulate(acc2, packed, xq + 2 * xRow, load<f32>(xd + 2 * sRow));
      acc3 = PackedBlock.accumulate(acc3, packed, xq + 3 * xRow, load<f32>(xd + 3 * sRow));
      packed += PACKED_BLOCK_BYTES;
      xq += 64;
      xd += 4;
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
    let acc = f32x4.splat(0);
    for (let i = 0; i < blocks; i++) {
      acc = PackedBlock.accumulate(acc, p, x, load<f32>(d));
      p += PACKED_BLOCK_BYTES;
      x += 64;
      d += 4;
    }
    v128.store(results + (<usize>r << 4), acc);
  }
}

/**
 * A packed tile · eight tokens: two consecutive four-token groups of interleaved
 * activations (quantize.ts's interleaveTokens) from xq4, with their block scales from
 * xd4; tokens past the batch are zero padding.
 * Writes f32x4 per token at results, lane k = row k's dot product, without the
 * minimums (minimumsTerm4). The running float sums live in `sums` (8 x f32x4 of
 * scratch): with the eight integer sums and the operands they would not fit the
 * fifteen vector registers V8 allocates.
 */
export function dotPackedTile8(packed: usize, xq4: usize, xd4: usize, blocks: i32, results: usize, sums: usize): void {
  const zero = f32x4.splat(0);
  for (let k: usize = 0; k < 8; k++) v128.store(sums + (k << 4), zero);
  // A group of four tokens: 16 pairs of 16 bytes per block, and one f32x4 of block scales.
  let xa = xq4;
  let xb = xq4 + <usize>blocks * 256;
  let da = xd4;
  let db = xd4 + <usize>blocks * 16;
  for (let i = 0; i < blocks; i++) {
    let s0 = i32x4.splat(0);
    let s1 = s0;
    let s2 = s0;
    let s3 = s0;
    let s4 = s0;
    let s5 = s0;
    let s6 = s0;
    let s7 = s0;
    // A loop over the sixteen pairs, not the pairs written out: V8 then keeps each
    // pair's loads next to their products (written out, it hoisted the loads and spilled).
    let p = packed + 16;
    for (let pair = 0; pair < 16; pair++) {
      const va = v128.load(xa);
      const vb = v128.load(xb);
      let w = v128.load32_splat(p, 0);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(w, va));
      s4 = i32x4.add(s4, i32x4.dot_i16x8_s(w, vb));
      w = v128.load32_splat(p, 64);
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(w, va));
      s5 = i32x4.add(s5, i32x4.dot_i16x8_s(w, vb));
      w = v128.load32_splat(p, 128);
      s2 = i32x4.add(s2, i32x4.dot_i16x8_s(w, va));
      s6 = i32x4.add(s6, i32x4.dot_i16x8_s(w, vb));
      w = v128.load32_splat(p, 192);
      s3 = i32x4.add(s3, i32x4.dot_i16x8_s(w, va));
      s7 = i32x4.add(s7, i32x4.dot_i16x8_s(w, vb));
      p += 4;
      xa += 16;
      xb += 16;
    }
    const dA = v128.load(da);
    const dB = v128.load(db);
    let scale = v128.load32_splat(packed, 0);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 0), s0, scale, dA), 0);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 64), s4, scale, dB), 64);
    scale = v128.load32_splat(packed, 4);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 16), s1, scale, dA), 16);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 80), s5, scale, dB), 80);
    scale = v128.load32_splat(packed, 8);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 32), s2, scale, dA), 32);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 96), s6, scale, dB), 96);
    scale = v128.load32_splat(packed, 12);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 48), s3, scale, dA), 48);
    v128.store(sums, PackedBlock.scaled(v128.load(sums, 112), s7, scale, dB), 112);
    packed += PACKED_BLOCK_BYTES;
    da += 16;
    db += 16;
  }
  transposeRows4(v128.load(sums, 0), v128.load(sums, 16), v128.load(sums, 32), v128.load(sums, 48), results);
  transposeRows4(v128.load(sums, 64), v128.load(sums, 80), v128.load(sums, 96), v128.load(sums, 112), results + 64);
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
 * products. (Four chunks per loop pass, written out, ran slower than this loop:
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
