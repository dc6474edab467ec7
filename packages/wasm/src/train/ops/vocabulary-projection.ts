/**
 * The LM head's vocabulary projection over a chunk of token rows, forward and
 * input gradient, for a frozen head w [vocab, hidden] (SmolLM2's 49152 x 576,
 * Qwen2.5's 151936 x 896: the largest matrix of a small model, and most of a
 * step's matmul work after the blocks'). An F32 head runs on Kernels.gemm with
 * w as stored both ways, logits = x · wᵀ and dx += dLogits · w: gemm packs
 * panels of w once per chunk of rows and keeps them in cache across the rows
 * (the batched matmul re-read all of w from memory for every two rows: 2-3x
 * slower on SmolLM2's head), and the backward needs no transposed copy of w (the
 * frozen linear's backward transposed the head once per chunk of logits).
 * Other encodings, float64 runs (gradient checks) and kernels without gemm take
 * the frozen linear's paths.
 */
import { GgmlType } from "@infer/formats";
import type { Kernels, WeightMatrix } from "../../kernels/types.js";
import { float32View } from "../../kernels/dequant.js";
import { frozenLinearBackward, frozenLinearForward } from "./linear.js";

/** logits [n, w.rows] = x [n, w.cols] · wᵀ. */
export function vocabularyForward(kernels: Kernels, logits: Float32Array, w: WeightMatrix, x: Float32Array, n: number): void {
  const gemm = headGemm(kernels, w, x);
  if (gemm) gemm(logits, x, float32View(w), { m: n, n: w.rows, k: w.cols, transposeB: true });
  else frozenLinearForward(kernels, logits, w, x, n);
}

/** dx [n, w.cols] += dLogits [n, w.rows] · w. */
export function vocabularyBackward(kernels: Kernels, dx: Float32Array, w: WeightMatrix, dLogits: Float32Array, n: number): void {
  const gemm = headGemm(kernels, w, dLogits);
  if (gemm) gemm(dx, dLogits, float32View(w), { m: n, n: w.cols, k: w.rows, accumulate: true });
  else frozenLinearBackward(dx, w, dLogits, n, kernels);
}

/** The kernels' gemm where it runs this head: F32 weights (4-byte aligned) and float32 activations. */
function headGemm(kernels: Kernels, w: WeightMatrix, x: Float32Array): Kernels["gemm"] {
  if (w.type !== GgmlType.F32 || w.data.byteOffset % 4 !== 0 || !(x instanceof Float32Array)) return undefined;
  return kernels.gemm?.bind(kernels);
}
