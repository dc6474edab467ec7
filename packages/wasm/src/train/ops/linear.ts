/**
 * Linear layers, forward and backward. A frozen base matrix stays in its
 * stored encoding (F32, F16, BF16, Q8_0, K-quants, the kernels' interleaved
 * layouts): the forward runs it through the kernels' matmul, the backward
 * through matmuls by its transpose. Dense float32 matrices (LoRA's A and B) are
 * trained, so their backward also gives the weight gradient. Sums run in float64.
 */
import { GgmlType } from "@infer/formats";
import type { Kernels, WeightMatrix } from "../../kernels/types.js";
import { dequantizeMatrixRow, float32View } from "../../kernels/dequant.js";
import { workspaceOf } from "./buffers.js";
import { dequantizedBackward } from "./dequantized-backward.js";

/** out [n, w.rows] = x [n, w.cols] · wᵀ (+ bias [w.rows]). */
export function frozenLinearForward(kernels: Kernels, out: Float32Array, w: WeightMatrix, x: Float32Array, n: number, bias?: Float32Array): void {
  kernels.matmul(out, w, x, n);
  if (bias) addRows(out, bias, n);
}

/** Element bytes of the float encodings a transpose keeps exactly. */
const FLOAT_BYTES: ReadonlyMap<number, number> = new Map([
  [GgmlType.F32, 4],
  [GgmlType.F16, 2],
  [GgmlType.BF16, 2],
]);

/** Bytes of wᵀ transposed at a time: the whole transposed matrix never exists. */
const TRANSPOSE_BLOCK_BYTES = 16 << 20;

/**
 * dx [n, w.cols] += dy [n, w.rows] · w (the gradient of a frozen linear's
 * input). A float base runs on the kernels as wᵀ, transposed (the same values,
 * moved) a block of columns at a time into a reused buffer: a copy of the
 * model's weights would double a float base's memory and overflow the
 * kernels' 4 GiB for the larger models, and each step's moves are cheap beside
 * its matmuls. A block-quantized base, whose rows cannot be transposed without
 * re-encoding them, stays as stored: the kernels multiply by panels of wᵀ
 * they dequantize (dequantized-backward.ts; F16 and BF16 bases too), or
 * without such a kernel it is dequantized a row at a time here, the reference.
 */
export function frozenLinearBackward(dx: Float32Array, w: WeightMatrix, dy: Float32Array, n: number, kernels?: Kernels): void {
  // F16 and BF16 too: widened to float32 by the kernels' threads, their panels beat the halves' transpose here (0.6-0.8x CPU).
  if (kernels && w.type !== GgmlType.F32 && dequantizedBackward(kernels, dx, w, dy, n)) return;
  // (kernels.gemm runs dy · w over w as stored, without the transposes; on SmolLM2's shapes it
  // measured slower than the transposed matmul for k = 1536 at 1 thread: see bench/train-matmul.mjs.)
  const size = FLOAT_BYTES.get(w.type);
  if (kernels && size !== undefined) {
    transposedBackward(kernels, dx, w, dy, n, size);
    return;
  }
  const { rows, cols } = w;
  const f32 = w.type === GgmlType.F32 ? float32View(w) : undefined;
  const row = new Float32Array(cols); // one dequantized row
  const acc = new Float64Array(n * cols); // [n, cols]
  for (let r = 0; r < rows; r++) {
    if (f32) row.set(f32.subarray(r * cols, (r + 1) * cols));
    else dequantizeMatrixRow(w, r, row);
    for (let b = 0; b < n; b++) {
      const g = dy[b * rows + r]!;
      if (g === 0) continue;
      const base = b * cols;
      for (let c = 0; c < cols; c++) acc[base + c] += g * row[c]!;
    }
  }
  for (let i = 0; i < n * cols; i++) dx[i] = dx[i]! + acc[i]!;
}

/**
 * out [n, rows] = x [n, cols] · wᵀ for a dense w [rows, cols]: on the kernels'
 * matmulDense where they have one (float32 buffers), else here in float64.
 */
export function denseForward(out: Float32Array, w: Float32Array, rows: number, cols: number, x: Float32Array, n: number, kernels?: Kernels): void {
  const gemm = gemmKernel(kernels, x);
  if (gemm) {
    gemm(out, x, w, { m: n, n: rows, k: cols, transposeB: true });
    return;
  }
  const fast = denseKernel(kernels, x);
  if (fast) {
    fast(out, w, rows, cols, x, n);
    return;
  }
  for (let b = 0; b < n; b++) {
    const xBase = b * cols;
    for (let r = 0; r < rows; r++) {
      const wBase = r * cols;
      let sum = 0;
      for (let c = 0; c < cols; c++) sum += w[wBase + c]! * x[xBase + c]!;
      out[b * rows + r] = sum;
    }
  }
}

/**
 * Backward of denseForward: dw [rows, cols] += dyᵀ · x, and dx [n, cols] += dy · w
 * when dx is given. On the kernels' matmulDense (where they have one, float32
 * buffers) both are matmuls over transposed copies; else summed here in float64.
 */
export function denseBackward(
  dw: Float32Array,
  dx: Float32Array | undefined,
  w: Float32Array,
  rows: number,
  cols: number,
  x: Float32Array,
  dy: Float32Array,
  n: number,
  kernels?: Kernels,
): void {
  const gemm = gemmKernel(kernels, x);
  if (gemm) {
    // dw [rows, cols] += dyᵀ · x; dx [n, cols] += dy · w: w and x as stored.
    gemm(dw, dy, x, { m: rows, n: cols, k: n, transposeA: true, accumulate: true });
    if (dx) gemm(dx, dy, w, { m: n, n: cols, k: rows, accumulate: true });
    return;
  }
  const fast = denseKernel(kernels, x);
  if (fast) {
    // dw[r, c] = Σ_b xᵀ[c, b] dyᵀ[r, b]: the matmul of xᵀ [cols, n] over the rows of dyᵀ [rows, n].
    const product = new Float32Array(rows * cols);
    fast(product, transpose(x, n, cols), cols, n, transpose(dy, n, rows), rows);
    addInto(dw, product);
    if (dx) {
      // dx[b, c] = Σ_r wᵀ[c, r] dy[b, r].
      const dxProduct = new Float32Array(n * cols);
      fast(dxProduct, transpose(w, rows, cols), cols, rows, dy, n);
      addInto(dx, dxProduct);
    }
    return;
  }
  const acc = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    acc.fill(0);
    for (let b = 0; b < n; b++) {
      const g = dy[b * rows + r]!;
      if (g === 0) continue;
      const xBase = b * cols;
      for (let c = 0; c < cols; c++) acc[c] += g * x[xBase + c]!;
    }
    const wBase = r * cols;
    for (let c = 0; c < cols; c++) dw[wBase + c] = dw[wBase + c]! + acc[c]!;
  }
  if (!dx) return;
  for (let b = 0; b < n; b++) {
    acc.fill(0);
    for (let r = 0; r < rows; r++) {
      const g = dy[b * rows + r]!;
      if (g === 0) continue;
      const wBase = r * cols;
      for (let c = 0; c < cols; c++) acc[c] += g * w[wBase + c]!;
    }
    const xBase = b * cols;
    for (let c = 0; c < cols; c++) dx[xBase + c] = dx[xBase + c]! + acc[c]!;
  }
}

/** The kernels' matmulDense for float32 buffers (float64 runs, the gradient checks', stay here). */
function denseKernel(kernels: Kernels | undefined, x: Float32Array): Kernels["matmulDense"] {
  return x instanceof Float32Array ? kernels?.matmulDense?.bind(kernels) : undefined;
}

/** The kernels' gemm for float32 buffers (float64 runs stay on the reference loops). */
function gemmKernel(kernels: Kernels | undefined, x: Float32Array): Kernels["gemm"] {
  return x instanceof Float32Array ? kernels?.gemm?.bind(kernels) : undefined;
}

/** m [rows, cols] as mᵀ [cols, rows]. */
function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    for (let c = 0; c < cols; c++) t[c * rows + r] = m[base + c]!;
  }
  return t;
}

function addInto(target: Float32Array, values: Float32Array): void {
  for (let i = 0; i < values.length; i++) target[i] = target[i]! + values[i]!;
}

/** x[r, :] += bias for r < rows. */
export function addRows(x: Float32Array, bias: Float32Array, rows: number): void {
  const dim = bias.length;
  for (let r = 0; r < rows; r++) for (let i = 0; i < dim; i++) x[r * dim + i] = x[r * dim + i]! + bias[i]!;
}

/** frozenLinearBackward over a float base: per block of w's columns, transpose it and run dy · block on the kernels. */
function transposedBackward(kernels: Kernels, dx: Float32Array, w: WeightMatrix, dy: Float32Array, n: number, size: number): void {
  const { rows, cols } = w;
  const width = Math.max(1, Math.min(cols, Math.floor(TRANSPOSE_BLOCK_BYTES / (rows * size))));
  const workspace = workspaceOf(kernels);
  const block = workspace.bytes("transpose", width * rows * size);
  // Float64 runs (gradient checks, reference kernels) keep their products in double precision.
  const product = dx.constructor === Float32Array ? workspace.floats("transpose-product", n * width) : new (dx.constructor as Float32ArrayConstructor)(n * width);
  for (let from = 0; from < cols; from += width) {
    const count = Math.min(width, cols - from);
    if (kernels.transposeColumns) kernels.transposeColumns(w, size, from, count, block);
    else transposeColumns(w, size, from, count, block);
    const t: WeightMatrix = { type: w.type, rows: count, cols: rows, data: block.subarray(0, count * rows * size) };
    kernels.matmul(product, t, dy, n);
    for (let b = 0; b < n; b++) {
      const to = b * cols + from;
      const at = b * count;
      for (let j = 0; j < count; j++) dx[to + j] = dx[to + j]! + product[at + j]!;
    }
  }
}

/** out [count, w.rows] = the columns from .. from + count of w, transposed, as elements of `size` bytes. */
function transposeColumns(w: WeightMatrix, size: number, from: number, count: number, out: Uint8Array): void {
  const { rows, cols, data } = w;
  const Elements: Uint32ArrayConstructor | Uint16ArrayConstructor = size === 4 ? Uint32Array : Uint16Array;
  // Element views need aligned bytes; a weight seen through an odd offset is copied once per call.
  const source = data.byteOffset % size === 0 ? data : data.slice(0, rows * cols * size);
  const src = new Elements(source.buffer as ArrayBuffer, source.byteOffset, rows * cols);
  const dst = new Elements(out.buffer as ArrayBuffer, out.byteOffset, count * rows);
  for (let r = 0; r < rows; r++) {
    const at = r * cols + from;
    for (let j = 0; j < count; j++) dst[j * rows + r] = src[at + j]!;
  }
}
