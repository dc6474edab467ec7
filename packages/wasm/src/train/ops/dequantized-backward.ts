/**
 * The backward of a frozen linear over a block-quantized base (Q8_0, Q4_0, the
 * K-quants, the kernels' interleaved layouts) or a half-float one (F16, BF16)
 * on the kernels: dx [n, cols] += dy [n, rows] · w, as matmuls of dy by panels
 * of wᵀ that the kernels dequantize into a reused float32 buffer
 * (Kernels.dequantizeTransposed). A quantized row's blocks run along its
 * columns, so wᵀ cannot be read in place; a panel costs one decode of its
 * elements, against n multiply-adds each in the product. The reference
 * (frozenLinearBackward's row-by-row loop) stays in linear.ts.
 */
import { GgmlType } from "@infer/formats";
import type { Kernels, WeightMatrix } from "../../kernels/types.js";
import { workspaceOf } from "./buffers.js";

/**
 * Bytes of one panel of wᵀ: the whole of a block's matrices (up to 2304 x 1536
 * floats), a vocabulary's head in slices of columns. The dequantized model
 * never exists at once.
 */
const PANEL_BYTES = 16 << 20;

/**
 * dx += dy · w on the kernels' dequantizeTransposed and matmul, in panels of at
 * most about `panelBytes`; false (nothing done) where they have no kernel for
 * w's type, or for float64 buffers (the gradient checks', which the reference
 * keeps in double precision).
 */
export function dequantizedBackward(kernels: Kernels, dx: Float32Array, w: WeightMatrix, dy: Float32Array, n: number, panelBytes = PANEL_BYTES): boolean {
  const align = kernels.dequantizeTransposedAlign?.(w.type) ?? 0;
  if (align === 0 || !kernels.dequantizeTransposed || dx.constructor !== Float32Array || dy.constructor !== Float32Array) return false;
  const { rows, cols } = w;
  if (cols % align !== 0) return false;
  // Columns per panel (whole blocks), and rows: all of them unless one block's columns overflow the budget.
  const panelRows = Math.min(rows, Math.max(4, Math.floor(panelBytes / (align * 4)) & ~3));
  const width = Math.min(cols, Math.max(align, Math.floor(panelBytes / (panelRows * 4 * align)) * align));
  const workspace = workspaceOf(kernels);
  const bytes = workspace.bytes("dequantized-panel", width * panelRows * 4);
  const panel = new Float32Array(bytes.buffer, bytes.byteOffset, width * panelRows);
  const product = workspace.floats("dequantized-product", n * width);
  const dyPanel = panelRows < rows ? workspace.floats("dequantized-dy", n * panelRows) : dy;
  for (let from = 0; from < cols; from += width) {
    const count = Math.min(width, cols - from);
    for (let first = 0; first < rows; first += panelRows) {
      const span = Math.min(panelRows, rows - first);
      kernels.dequantizeTransposed(panel, w, first, span, from, count);
      if (dyPanel !== dy) {
        for (let b = 0; b < n; b++) dyPanel.set(dy.subarray(b * rows + first, b * rows + first + span), b * span);
      }
      const t: WeightMatrix = { type: GgmlType.F32, rows: count, cols: span, data: bytes.subarray(0, count * span * 4) };
      kernels.matmul(product, t, dyPanel, n);
      for (let b = 0; b < n; b++) {
        const to = b * cols + from;
        const at = b * count;
        for (let j = 0; j < count; j++) dx[to + j] = dx[to + j]! + product[at + j]!;
      }
    }
  }
  return true;
}
