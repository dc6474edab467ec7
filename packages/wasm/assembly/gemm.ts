// Float32 matrix products as register tiles of outer products:
//   c [m, n] = a [m, k] · b [k, n]   (or c += a · b)
// with each operand at any row and element strides (a read transposed is
// just other strides), and b either as rows [k, n] or as rows of bᵀ [n, k]
// (a weight matrix as stored, whose rows are c's columns: the forward's x · wᵀ).
//
// b is packed a panel of PANEL (8) columns at a time into [k][8] floats
// (packPanel; from bᵀ through 4 x 4 transposes), a group of panels at a time
// into this thread's scratch, small enough to stay in the core's L2 cache.
// Then per tile of four rows of a (four tokens): for each panel, eight f32x4
// accumulators (4 rows x 8 columns) and per step of k one splat of a[i, k]
// per row (a load that splats) times the panel's two vectors of row k: eight
// multiply-adds for six loads, no horizontal sums, and the four rows of a
// stay in the L1 cache across the group's panels.
//
// Each c[i, j] is its products a[i, kk] * b[kk, j] added in order of kk from
// 0 in one lane, then (accumulating) added to c once: the same bits whatever
// the tile, group, thread split or number of rows of a.

/** Columns of c per packed panel: two f32x4. */
export const PANEL = 8;

/** Bytes of packed panels one group aims at: they are re-read for every tile of rows, from L2. */
const GROUP_BYTES: i32 = 128 * 1024;

/** Most rows of k one packed panel holds: a panel (32 bytes a row) stays in the L1 cache while a tile runs over it. */
const MAX_DEPTH = 256;

/** Bytes of an edge tile (4 x 8 floats; see tile). */
const EDGE_BYTES: i32 = 4 * PANEL * 4;

/** Scratch bytes one thread needs for gemm: one group of packed panels, an edge tile, four packed rows of a. */
export function gemmScratchBytes(): i32 {
  return GROUP_BYTES + EDGE_BYTES + 16 * MAX_DEPTH;
}

/** Rows of k per block: k in as few blocks of at most MAX_DEPTH as it takes, of near-equal sizes. */
function depthBlock(k: i32): i32 {
  const blocks = (k + MAX_DEPTH - 1) / MAX_DEPTH;
  return (k + blocks - 1) / blocks;
}

/**
 * Packs columns j .. j + count (count 1..8) of b into panel [k][8]: b(kk, j) at
 * b + kk * bRow + j * 4, or with bTransposed at b + j * bRow + kk * 4. Lanes
 * past count repeat the last column (computed, never stored).
 */
function packPanel(b: usize, bRow: usize, bTransposed: bool, j: i32, count: i32, k: i32, panel: usize): void {
  if (!bTransposed) {
    let from = b + (<usize>j << 2);
    if (count == PANEL) {
      for (let kk = 0; kk < k; kk++) {
        v128.store(panel, v128.load(from), 0);
        v128.store(panel, v128.load(from, 16), 16);
        from += bRow;
        panel += 32;
      }
      return;
    }
    for (let kk = 0; kk < k; kk++) {
      for (let t = 0; t < PANEL; t++) store<f32>(panel + (<usize>t << 2), load<f32>(from + (<usize>min(t, count - 1) << 2)));
      from += bRow;
      panel += 32;
    }
    return;
  }
  // Rows of bᵀ: four rows' four floats at a time, transposed into four rows of the panel.
  const last = count - 1;
  const r0 = b + <usize>j * bRow;
  const r1 = b + <usize>(j + min(1, last)) * bRow;
  const r2 = b + <usize>(j + min(2, last)) * bRow;
  const r3 = b + <usize>(j + min(3, last)) * bRow;
  const r4 = b + <usize>(j + min(4, last)) * bRow;
  const r5 = b + <usize>(j + min(5, last)) * bRow;
  const r6 = b + <usize>(j + min(6, last)) * bRow;
  const r7 = b + <usize>(j + min(7, last)) * bRow;
  let kk = 0;
  for (; kk + 4 <= k; kk += 4) {
    const o = <usize>kk << 2;
    const to = panel + (<usize>kk << 5);
    transposeInto(v128.load(r0 + o), v128.load(r1 + o), v128.load(r2 + o), v128.load(r3 + o), to, 32);
    transposeInto(v128.load(r4 + o), v128.load(r5 + o), v128.load(r6 + o), v128.load(r7 + o), to + 16, 32);
  }
  for (; kk < k; kk++) {
    const o = <usize>kk << 2;
    const to = panel + (<usize>kk << 5);
    store<f32>(to, load<f32>(r0 + o), 0);
    store<f32>(to, load<f32>(r1 + o), 4);
    store<f32>(to, load<f32>(r2 + o), 8);
    store<f32>(to, load<f32>(r3 + o), 12);
    store<f32>(to, load<f32>(r4 + o), 16);
    store<f32>(to, load<f32>(r5 + o), 20);
    store<f32>(to, load<f32>(r6 + o), 24);
    store<f32>(to, load<f32>(r7 + o), 28);
  }
}

/** Four vectors (rows) stored transposed, `stride` bytes apart: vector q at to + q * stride holds lane q of v0..v3. */
function transposeInto(v0: v128, v1: v128, v2: v128, v3: v128, to: usize, stride: usize): void {
  const t0 = i32x4.shuffle(v0, v1, 0, 4, 1, 5);
  const t1 = i32x4.shuffle(v0, v1, 2, 6, 3, 7);
  const t2 = i32x4.shuffle(v2, v3, 0, 4, 1, 5);
  const t3 = i32x4.shuffle(v2, v3, 2, 6, 3, 7);
  v128.store(to, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
  v128.store(to + stride, i32x4.shuffle(t0, t2, 2, 3, 6, 7));
  v128.store(to + 2 * stride, i32x4.shuffle(t1, t3, 0, 1, 4, 5));
  v128.store(to + 3 * stride, i32x4.shuffle(t1, t3, 2, 3, 6, 7));
}

/** Static members only so that they can be marked @inline (eslint's parser takes decorators on class members only). */
class Lanes {
  /** c + s * b: one fused multiply-add in the relaxed-SIMD build, a multiply and an add in the baseline one. */
  @inline static madd(s: v128, b: v128, c: v128): v128 {
    if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(s, b, c);
    return f32x4.add(c, f32x4.mul(s, b));
  }
}

/** 4 rows x 8 zero floats: where a tile that starts from zero reads its starting sums (one loop for both starts). */
const ZEROS = memory.data(4 * PANEL * 4, 16);

/**
 * Rows i .. i + rows (1..4) of a, columns k0 .. k0 + k (a at a(i, k0)), packed
 * as [k][4] floats: step kk's four values side by side, the rows past `rows`
 * repeating the last (computed, never stored).
 */
function packRows(a: usize, aRow: usize, aStep: usize, rows: i32, k: i32, out: usize): void {
  const last = rows - 1;
  const a0 = a;
  const a1 = a + <usize>min(1, last) * aRow;
  const a2 = a + <usize>min(2, last) * aRow;
  const a3 = a + <usize>min(3, last) * aRow;
  let kk = 0;
  if (aStep == 4) {
    // Rows along k: four steps of the four rows at a time, transposed.
    for (; kk + 4 <= k; kk += 4) {
      const o = <usize>kk << 2;
      transposeInto(v128.load(a0 + o), v128.load(a1 + o), v128.load(a2 + o), v128.load(a3 + o), out + (<usize>kk << 4), 16);
    }
  } else if (aRow == 4 && rows == 4) {
    // The four rows side by side (a read transposed): one load per step.
    for (; kk < k; kk++) v128.store(out + (<usize>kk << 4), v128.load(a0 + <usize>kk * aStep));
  }
  for (; kk < k; kk++) {
    const o = <usize>kk * aStep;
    const to = out + (<usize>kk << 4);
    store<f32>(to, load<f32>(a0 + o), 0);
    store<f32>(to, load<f32>(a1 + o), 4);
    store<f32>(to, load<f32>(a2 + o), 8);
    store<f32>(to, load<f32>(a3 + o), 12);
  }
}

/**
 * Four packed rows of a ([k][4] at pa) times one packed panel ([k][8]): a
 * tile of c's four rows by eight columns (c at its first), starting from the
 * sums at `from` (rows fromRow bytes apart: c itself, or ZEROS). Per step of
 * k: two vectors of the panel, four splats of a, eight multiply-adds. (Starting
 * sums from one or the other path of a branch cost V8's loop a third of its
 * speed: hence the loads from `from`, always.)
 */
function tile4(pa: usize, panel: usize, k: i32, c: usize, cRow: usize, from: usize, fromRow: usize): void {
  let c0 = v128.load(from);
  let c1 = v128.load(from, 16);
  let c2 = v128.load(from + fromRow);
  let c3 = v128.load(from + fromRow, 16);
  let c4 = v128.load(from + 2 * fromRow);
  let c5 = v128.load(from + 2 * fromRow, 16);
  let c6 = v128.load(from + 3 * fromRow);
  let c7 = v128.load(from + 3 * fromRow, 16);
  let p = panel;
  let q = pa;
  const end = panel + (<usize>k << 5);
  do {
    const b0 = v128.load(p);
    const b1 = v128.load(p, 16);
    let s = v128.load32_splat(q);
    c0 = Lanes.madd(s, b0, c0);
    c1 = Lanes.madd(s, b1, c1);
    s = v128.load32_splat(q, 4);
    c2 = Lanes.madd(s, b0, c2);
    c3 = Lanes.madd(s, b1, c3);
    s = v128.load32_splat(q, 8);
    c4 = Lanes.madd(s, b0, c4);
    c5 = Lanes.madd(s, b1, c5);
    s = v128.load32_splat(q, 12);
    c6 = Lanes.madd(s, b0, c6);
    c7 = Lanes.madd(s, b1, c7);
    p += 32;
    q += 16;
  } while (p < end);
  v128.store(c, c0);
  v128.store(c, c1, 16);
  v128.store(c + cRow, c2);
  v128.store(c + cRow, c3, 16);
  v128.store(c + 2 * cRow, c4);
  v128.store(c + 2 * cRow, c5, 16);
  v128.store(c + 3 * cRow, c6);
  v128.store(c + 3 * cRow, c7, 16);
}

/**
 * One tile: packed rows of a times a packed panel, for c's first `rows` (1..4)
 * rows and `count` (1..8) columns: in place when the tile is whole, else
 * through `edge` (4 x 8 floats of scratch), c's values copied in (resume) and out.
 */
function tile(pa: usize, panel: usize, k: i32, c: usize, cRow: usize, rows: i32, count: i32, resume: bool, edge: usize): void {
  if (rows == 4 && count == PANEL) {
    tile4(pa, panel, k, c, cRow, resume ? c : ZEROS, resume ? cRow : 32);
    return;
  }
  for (let r = 0; r < 4; r++) {
    for (let t = 0; t < PANEL; t++) store<f32>(edge + <usize>(r * 32 + t * 4), resume && r < rows && t < count ? load<f32>(c + <usize>r * cRow + (<usize>t << 2)) : 0);
  }
  tile4(pa, panel, k, edge, 32, edge, 32);
  for (let r = 0; r < rows; r++) {
    for (let t = 0; t < count; t++) store<f32>(c + <usize>r * cRow + (<usize>t << 2), load<f32>(edge + <usize>(r * 32 + t * 4)));
  }
}

/**
 * c [m, n] = a [m, k] · b [k, n], or c += a · b with accumulate. Addresses and
 * byte strides: c(i, j) at c + i * cRow + j * 4; a(i, kk) at a + i * aRow + kk * aStep;
 * b(kk, j) at b + kk * bRow + j * 4, or with bTransposed (b given as bᵀ [n, k],
 * a weight matrix's rows) at b + j * bRow + kk * 4. scratch: gemmScratchBytes()
 * bytes of this thread's own.
 *
 * Each c[i, j] runs one sum: from c[i, j] with accumulate, else from zero, each
 * product a[i, kk] * b[kk, j] added in order of kk. Blocks of k (depthBlock)
 * leave the running sums in c between them (stored and reloaded exactly), so the
 * bits depend on nothing else: not the blocks, tiles, threads or rows of a.
 */
export function gemm(
  c: usize,
  cRow: usize,
  a: usize,
  aRow: usize,
  aStep: usize,
  b: usize,
  bRow: usize,
  bTransposed: bool,
  m: i32,
  n: i32,
  k: i32,
  accumulate: bool,
  scratch: usize,
): void {
  const depth = depthBlock(k);
  const panelBytes = <usize>depth * (PANEL * 4);
  const groupColumns = max(1, GROUP_BYTES / <i32>panelBytes) * PANEL;
  const edge = scratch + GROUP_BYTES;
  const packedRows = edge + EDGE_BYTES;
  for (let j0 = 0; j0 < n; j0 += groupColumns) {
    const columns = min(groupColumns, n - j0);
    for (let k0 = 0; k0 < k; k0 += depth) {
      const kc = min(depth, k - k0);
      const bBlock = bTransposed ? b + (<usize>k0 << 2) : b + <usize>k0 * bRow;
      for (let j = 0; j < columns; j += PANEL) {
        packPanel(bBlock, bRow, bTransposed, j0 + j, min(PANEL, columns - j), kc, scratch + <usize>(j / PANEL) * panelBytes);
      }
      const resume = accumulate || k0 > 0;
      const aBlock = a + <usize>k0 * aStep;
      const cGroup = c + (<usize>j0 << 2);
      for (let i = 0; i < m; i += 4) {
        const rows = min(4, m - i);
        packRows(aBlock + <usize>i * aRow, aRow, aStep, rows, kc, packedRows);
        const ci = cGroup + <usize>i * cRow;
        for (let j = 0; j < columns; j += PANEL) {
          tile(packedRows, scratch + <usize>(j / PANEL) * panelBytes, kc, ci + (<usize>j << 2), cRow, rows, min(PANEL, columns - j), resume, edge);
        }
      }
    }
  }
}
