// Training's transposed float weights (src/train/ops/linear.ts: the input
// gradient of a frozen F32/F16/BF16 linear runs over wᵀ a block of columns at
// a time): dst [count, rows] = the columns from .. from + count of src [rows, cols],
// elements of 4 or 2 bytes. Walked in tiles so that reads and writes both stay
// in cache (a plain row-by-row transpose misses it on every strided write);
// threads split the source rows, each writing its own elements of every dst row.

/** Source rows and columns of a tile: 64 x 64 four-byte elements, 16 KiB in and out. */
const TILE = 64;

export function transposeColumns(src: usize, cols: i32, from: i32, count: i32, dst: usize, rows: i32, size: i32, rowStart: i32, rowEnd: i32): void {
  for (let r0 = rowStart; r0 < rowEnd; r0 += TILE) {
    const r1 = min(rowEnd, r0 + TILE);
    for (let j0 = 0; j0 < count; j0 += TILE) {
      const j1 = min(count, j0 + TILE);
      if (size == 4) tile4(src, cols, from, dst, rows, r0, r1, j0, j1);
      else tile2(src, cols, from, dst, rows, r0, r1, j0, j1);
    }
  }
}

/** Rows [r0, r1) by columns [j0, j1) of four-byte elements: 4 x 4 blocks in f32x4 lanes, the edges one at a time. */
function tile4(src: usize, cols: i32, from: i32, dst: usize, rows: i32, r0: i32, r1: i32, j0: i32, j1: i32): void {
  const rowBytes = <usize>cols << 2;
  const dstRowBytes = <usize>rows << 2;
  let r = r0;
  for (; r + 4 <= r1; r += 4) {
    const a = src + <usize>r * rowBytes + (<usize>from << 2);
    let j = j0;
    for (; j + 4 <= j1; j += 4) {
      const at = a + (<usize>j << 2);
      const a0 = v128.load(at);
      const a1 = v128.load(at + rowBytes);
      const a2 = v128.load(at + 2 * rowBytes);
      const a3 = v128.load(at + 3 * rowBytes);
      const t0 = v128.shuffle<i32>(a0, a1, 0, 4, 1, 5);
      const t1 = v128.shuffle<i32>(a0, a1, 2, 6, 3, 7);
      const t2 = v128.shuffle<i32>(a2, a3, 0, 4, 1, 5);
      const t3 = v128.shuffle<i32>(a2, a3, 2, 6, 3, 7);
      const out = dst + <usize>j * dstRowBytes + (<usize>r << 2);
      v128.store(out, v128.shuffle<i32>(t0, t2, 0, 1, 4, 5));
      v128.store(out + dstRowBytes, v128.shuffle<i32>(t0, t2, 2, 3, 6, 7));
      v128.store(out + 2 * dstRowBytes, v128.shuffle<i32>(t1, t3, 0, 1, 4, 5));
      v128.store(out + 3 * dstRowBytes, v128.shuffle<i32>(t1, t3, 2, 3, 6, 7));
    }
    for (; j < j1; j++) {
      for (let k = 0; k < 4; k++) store<u32>(dst + <usize>j * dstRowBytes + (<usize>(r + k) << 2), load<u32>(a + <usize>k * rowBytes + (<usize>j << 2)));
    }
  }
  for (; r < r1; r++) {
    const a = src + <usize>r * rowBytes + (<usize>from << 2);
    for (let j = j0; j < j1; j++) store<u32>(dst + <usize>j * dstRowBytes + (<usize>r << 2), load<u32>(a + (<usize>j << 2)));
  }
}

/** The same for two-byte elements (F16, BF16), one at a time. */
function tile2(src: usize, cols: i32, from: i32, dst: usize, rows: i32, r0: i32, r1: i32, j0: i32, j1: i32): void {
  for (let r = r0; r < r1; r++) {
    const a = src + ((<usize>r * <usize>cols + <usize>from) << 1);
    for (let j = j0; j < j1; j++) store<u16>(dst + ((<usize>j * <usize>rows + <usize>r) << 1), load<u16>(a + (<usize>j << 1)));
  }
}
