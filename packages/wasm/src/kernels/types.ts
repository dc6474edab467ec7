/**
 * The kernel interface: every heavy numeric step of the forward pass goes
 * through one of these, so the WebAssembly SIMD / threaded kernels can replace
 * the plain TypeScript reference kernels and be tested against them.
 */

import { GgmlType } from "@infer/formats";
import type { Activation, addBias, addInPlace, applyRope, rmsNorm } from "./ops.js";

/**
 * Not ggml types (no file holds them): Q4_0, Q8_0, Q5_0 and Q5_1 with their rows
 * interleaved in groups of four, the layout the WebAssembly kernels give such
 * a matrix at load (Kernels.prepareMatrix; assembly/interleave.ts): the same
 * bytes, moved. dequantizeMatrixRow reads them, so every kernel does. Their ids
 * lie far above ggml's, so the two never meet.
 */
export enum KernelLayout {
  Q4_0_X4 = 1000,
  Q8_0_X4 = 1001,
  Q5_0_X4 = 1002,
  Q5_1_X4 = 1003,
}

/** A weight matrix's encoding: a ggml type as stored, or a layout of the kernels' own. */
export type MatrixType = GgmlType | KernelLayout;

/** The stored type whose bytes an interleaved layout moves (Q4_0_X4 → Q4_0), else the type itself. */
export function plainTypeOf(type: MatrixType): GgmlType {
  switch (type) {
    case KernelLayout.Q4_0_X4:
      return GgmlType.Q4_0;
    case KernelLayout.Q8_0_X4:
      return GgmlType.Q8_0;
    case KernelLayout.Q5_0_X4:
      return GgmlType.Q5_0;
    case KernelLayout.Q5_1_X4:
      return GgmlType.Q5_1;
    default:
      return type;
  }
}

/**
 * A weight matrix kept in its stored encoding: `rows` rows of `cols` elements,
 * each row `cols / blockSize` blocks of the type's block layout (ggml's), rows
 * contiguous. `data` may be a view into the model file's bytes.
 */
export interface WeightMatrix {
  type: MatrixType;
  rows: number;
  cols: number;
  data: Uint8Array;
}

/** The shape of Kernels.gemm's product c [m, n] = a [m, k] · b [k, n]. */
export interface GemmShape {
  m: number;
  n: number;
  k: number;
  /** a is stored as aᵀ [k, m]. */
  transposeA?: boolean;
  /** b is stored as bᵀ [n, k] (a weight matrix's rows for x · wᵀ). */
  transposeB?: boolean;
  /** c += a · b (else c = a · b). */
  accumulate?: boolean;
}

export interface Kernels {
  readonly name: string;
  /**
   * out[b, r] = sum_c W[r, c] * x[b, c] for b < batch, r < rows.
   * x: [batch, cols] row-major; out: [batch, rows] row-major.
   */
  matmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void;
  /**
   * Several matrices sharing one input, such as the q/k/v or gate/up
   * projections: outs[i] = ws[i] · x, each as `matmul` (same cols, any types).
   * Kernels that offer it prepare x once and split all the rows in one go;
   * absent, call `matmul` per matrix.
   */
  matmulMany?(outs: readonly Float32Array[], ws: readonly WeightMatrix[], x: Float32Array, batch: number): void;
  /**
   * The gated MLP's middle in one pass: out[b, r] = act(gate[r, :] · x[b, :]) * (up[r, :] · x[b, :]),
   * out: [batch, rows]. Absent, use `matmul` (or `matmulMany`) and gatedActivation.
   */
  matmulGated?(out: Float32Array, gate: WeightMatrix, up: WeightMatrix, x: Float32Array, batch: number, activation: Activation): void;
  /**
   * out [batch, rows] = x [batch, cols] · wᵀ for a dense float32 w [rows, cols]
   * whose values change between calls (trained parameters, gradients): read as
   * they are on each call, never kept like a weight. Absent: the caller computes it.
   */
  matmulDense?(out: Float32Array, w: Float32Array, rows: number, cols: number, x: Float32Array, batch: number): void;
  /**
   * out [colCount, rowCount] = rows rowFrom .. rowFrom + rowCount and columns colFrom ..
   * colFrom + colCount of w, dequantized to float32 and transposed (a panel of wᵀ, what
   * training's backward through a frozen matrix multiplies by). colFrom and colCount:
   * multiples of `dequantizeTransposedAlign(w.type)`. Absent, or that returns 0 for the
   * type: the caller dequantizes rows itself (dequant.ts).
   */
  dequantizeTransposed?(out: Float32Array, w: WeightMatrix, rowFrom: number, rowCount: number, colFrom: number, colCount: number): void;
  /** The column alignment dequantizeTransposed needs for `type` (its block's elements), 0 where it does not read it. */
  dequantizeTransposedAlign?(type: MatrixType): number;
  /**
   * c [m, n] = a · b, or c += a · b with `accumulate`, in float32, for a [m, k] and b [k, n]
   * each possibly stored transposed (training's products: dy · w over a frozen base as stored,
   * LoRA's products and weight gradients). Every operand is read as it is on each call, never
   * kept like a weight. Each c[i, j] is one running sum (from c's value with accumulate),
   * the products added in order of k: the same bits on any thread count.
   */
  gemm?(c: Float32Array, a: Float32Array, b: Float32Array, shape: GemmShape): void;
  /**
   * A matrix as these kernels compute fastest with it, made once at load:
   * either `w` itself or the same values in a layout of the kernels' own (the
   * WebAssembly kernels interleave Q4_0, Q8_0, Q5_0 and Q5_1 rows by four: KernelLayout.Q4_0_X4). Bytes
   * that live in `allocate` memory are rewritten in place, others copied there;
   * use only the returned matrix afterwards. Absent: matrices are used as stored.
   */
  prepareMatrix?(w: WeightMatrix): WeightMatrix;
  /**
   * The light steps between the matmuls, where the kernels run them faster:
   * each takes the arguments of its namesake in ops.ts and gives the same bits;
   * the engine calls ops.ts's when these are absent.
   */
  readonly rmsNorm?: typeof rmsNorm;
  readonly rope?: typeof applyRope;
  readonly addInPlace?: typeof addInPlace;
  readonly addBias?: typeof addBias;
  /** The index of the largest value, as @infer/core's `argmax` gives it (greedy decoding's pick). */
  readonly argmax?: (values: Float32Array) => number;
  /** Causal attention over the KV cache; the engine uses the reference attention when absent. */
  attention?: AttentionKernel;
  /** Training's attention forward and backward; training uses its TypeScript reference (src/train/ops/attention.ts) when absent. */
  trainingAttention?: TrainingAttentionKernel;
  /**
   * Training's backward of the gated MLP's middle (out = act(gate) · up):
   * dGate += dOut · up · act'(gate), dUp += dOut · act(gate) over `count`
   * elements. Training uses its TypeScript reference (src/train/ops/gated-activation.ts) when absent.
   */
  gatedBackward?(dGate: Float32Array, dUp: Float32Array, dOut: Float32Array, gate: Float32Array, up: Float32Array, count: number, activation: Activation): void;
  /** Training's forward of the same: out = act(gate) · up over `count` elements (the reference: src/train/ops/gated-activation.ts). */
  gatedForward?(out: Float32Array, gate: Float32Array, up: Float32Array, count: number, activation: Activation): void;
  /**
   * Training's cross-entropy over logits [rows, vocab] with targets [rows] (−1: none): each row's
   * loss log Σ exp(logits) − logits[target] into losses [rows] (0 without a target), and with
   * `gradient` the logits overwritten by their gradient (softmax − one-hot) · gradScale (zeros
   * without a target). Training uses its TypeScript reference (src/train/ops/cross-entropy.ts) when absent.
   */
  crossEntropy?(logits: Float32Array, targets: Int32Array, rows: number, vocab: number, losses: Float64Array, gradScale: number, gradient: boolean): void;
  /**
   * out [count, w.rows] = the columns from .. from + count of a float weight w, transposed, as
   * elements of `size` bytes (4: F32, 2: F16 / BF16): training's input gradient of a frozen float
   * linear runs over such blocks of wᵀ. Training transposes in TypeScript (src/train/ops/linear.ts) when absent.
   */
  transposeColumns?(w: WeightMatrix, size: number, from: number, count: number, out: Uint8Array): void;
  /**
   * Memory the kernels read in place (the WebAssembly kernels' shared memory).
   * A loader that copies each weight into a view from here once, at load time,
   * spares the kernels a copy of their own; x and out views from here skip
   * per-call staging. The view is zero-filled, starts `align`-byte aligned (a
   * power of two, default 64) and stays valid until `release` or `dispose`.
   * Weights are read as immutable: bytes changed after their first matmul may
   * not be seen when they live outside this memory. Absent on kernels that read
   * any memory directly (the reference kernels).
   */
  allocate?(byteLength: number, align?: number): Uint8Array;
  /** Hands a view returned by `allocate` back for reuse. */
  release?(view: Uint8Array): void;
  /** Frees workers or memory the kernels hold. */
  dispose?(): Promise<void> | void;
}

/** Where one batch's attention reads its keys and values, and how it masks them. */
export interface AttentionParams {
  /** Tokens in the batch. */
  tokens: number;
  numHeads: number;
  numKVHeads: number;
  headDim: number;
  /** [tokens] position of each token in its sequence. */
  positions: Int32Array;
  /** [tokens] cache slot (sequence) of each token. */
  seqIds: Int32Array;
  /** Positions per cache slot: slot s, position p, KV head h starts at ((s * slotLength + p) * numKVHeads + h) * headDim. */
  slotLength: number;
  /** Multiplier applied to q·k before the softmax. */
  scale: number;
  /** Sliding window: token at position p sees positions p - window + 1 .. p; 0 = unlimited. */
  window: number;
  /** Gemma-2-style logit soft-capping: cap * tanh(score / cap); 0 = off. */
  softcap: number;
}

/**
 * One layer's cached keys or values, the array type naming the encoding:
 * Float32Array, float32; Uint16Array, IEEE f16 bits (half the bytes);
 * Uint8Array, Q8_0 blocks along each position's row of numKVHeads * headDim
 * elements (a multiple of 32): per 32 elements an f16 scale d then 32 int8 q,
 * element = d * q (34 bytes per 32 elements).
 */
export type KVBuffer = Float32Array | Uint16Array | Uint8Array;

/** Elements and bytes of one Q8_0 block. */
export const Q8_BLOCK = 32;
export const Q8_BLOCK_BYTES = 34;

/** The attention kernels' code for a cache's encoding (the WebAssembly kernel's `kvEncoding` argument). */
export function kvEncodingOf(buffer: KVBuffer): 0 | 1 | 2 {
  return buffer instanceof Float32Array ? 0 : buffer instanceof Uint16Array ? 1 : 2;
}

/**
 * Causal attention over a KV cache. q and out: [tokens, numHeads * headDim];
 * keys and values: one layer's cache, [slots, slotLength, numKVHeads * headDim],
 * both in the same encoding (see KVBuffer).
 * Query head h reads KV head floor(h / (numHeads / numKVHeads)) (grouped-query attention).
 */
export type AttentionKernel = (
  out: Float32Array,
  q: Float32Array,
  keys: KVBuffer,
  values: KVBuffer,
  params: AttentionParams,
) => void;

/**
 * Causal self-attention with grouped-query heads over packed sequences, as
 * training runs it. Layouts: q and the output [tokens, numHeads, headDim]; k and v
 * [tokens, numKVHeads, headDim]; query head h reads KV head
 * floor(h / (numHeads / numKVHeads)). Token t sees tokens first(t) .. t, where
 * first(t) is its sequence's first token (`sequenceStart[t]`), or later under a window.
 */
export interface TrainingAttentionShape {
  tokens: number;
  numHeads: number;
  numKVHeads: number;
  headDim: number;
  /** [tokens] index of the first token of each token's sequence; a sequence's tokens are consecutive. */
  sequenceStart: Int32Array;
  /** Multiplier on q·k. */
  scale: number;
  /** Sliding window in tokens; 0 = the whole sequence so far. */
  window: number;
}

/**
 * Training's attention without the softmax weights kept: the forward saves one
 * log Σ exp(score) per query row, from which the backward recomputes them.
 */
export interface TrainingAttentionKernel {
  /** Whether these kernels run this shape (else the caller uses the reference). */
  supports(shape: TrainingAttentionShape): boolean;
  /** out [tokens, numHeads * headDim]; logSumExp [tokens, numHeads] receives each query row's log Σ_j exp(scale q·k_j). */
  forward(out: Float32Array, logSumExp: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, shape: TrainingAttentionShape): void;
  /** dq, dk, dv += the gradients given dOut, the forward's inputs and its logSumExp. */
  backward(
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    dOut: Float32Array,
    logSumExp: Float32Array,
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    shape: TrainingAttentionShape,
  ): void;
}

/** [tokens] the first token each query of a training attention sees: its sequence's first, or later under a window. */
export function firstVisible(shape: TrainingAttentionShape): Int32Array {
  const first = new Int32Array(shape.tokens);
  for (let t = 0; t < shape.tokens; t++) {
    const start = shape.sequenceStart[t]!;
    first[t] = shape.window > 0 ? Math.max(start, t - shape.window + 1) : start;
  }
  return first;
}
