/**
 * Causal self-attention with grouped-query heads over packed sequences,
 * forward and backward (layouts: TrainingAttentionShape in kernels/types.ts).
 * The TypeScript reference keeps each query's softmax weights (the backward
 * reads them) and sums scores in float64; kernels with a `trainingAttention`
 * keep one log Σ exp per query row instead and recompute the weights in the
 * backward (assembly/train-attention.ts, tested against this reference).
 */
import { firstVisible, type Kernels, type TrainingAttentionShape } from "../../kernels/types.js";

export type AttentionShape = TrainingAttentionShape;

/** The softmax weights of a forward: for token t and head h, span(t) weights from weightOffset(t) + h * span(t). */
export interface AttentionWeights {
  /** [tokens] first token each query sees. */
  first: Int32Array;
  /** [tokens + 1] where each token's weights start (all heads), prefix sums of numHeads * span. */
  offsets: Int32Array;
  weights: Float64Array;
}

/** What the kernels' forward keeps instead: [tokens, numHeads] log Σ exp(score). */
export interface AttentionLogSumExp {
  logSumExp: Float32Array;
}

/** What a forward keeps for its backward: the reference's weights or the kernels' log-sum-exps. */
export type AttentionSaved = AttentionWeights | AttentionLogSumExp;

function visibleRange(shape: AttentionShape): { first: Int32Array; offsets: Int32Array } {
  const first = firstVisible(shape);
  const offsets = new Int32Array(shape.tokens + 1);
  for (let t = 0; t < shape.tokens; t++) offsets[t + 1] = offsets[t]! + shape.numHeads * (t - first[t]! + 1);
  return { first, offsets };
}

/** The kernels' training attention when they have one for this shape and the buffers are float32 (float64 runs are the reference's). */
function fastAttention(kernels: Kernels | undefined, q: Float32Array, shape: AttentionShape) {
  const fast = kernels?.trainingAttention;
  return fast && q instanceof Float32Array && fast.supports(shape) ? fast : undefined;
}

/** out = attention(q, k, v) on the kernels' training attention where they have one, else the reference. */
export function attentionForward(out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, shape: AttentionShape, kernels?: Kernels): AttentionSaved {
  const fast = fastAttention(kernels, q, shape);
  if (!fast) return referenceAttentionForward(out, q, k, v, shape);
  const logSumExp = new Float32Array(shape.tokens * shape.numHeads);
  fast.forward(out, logSumExp, q, k, v, shape);
  return { logSumExp };
}

/** dq, dk, dv += the gradients given dOut, the forward's inputs and what it saved. */
export function attentionBackward(
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  dOut: Float32Array,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  saved: AttentionSaved,
  shape: AttentionShape,
  kernels?: Kernels,
): void {
  if ("weights" in saved) {
    referenceAttentionBackward(dq, dk, dv, dOut, q, k, v, saved, shape);
    return;
  }
  const fast = fastAttention(kernels, q, shape);
  if (!fast) throw new Error("attentionBackward: the forward ran on kernels that this backward lacks");
  fast.backward(dq, dk, dv, dOut, saved.logSumExp, q, k, v, shape);
}

export function referenceAttentionForward(out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, shape: AttentionShape): AttentionWeights {
  const { numHeads, numKVHeads, headDim, scale } = shape;
  const group = numHeads / numKVHeads;
  const kvStride = numKVHeads * headDim;
  const { first, offsets } = visibleRange(shape);
  const weights = new Float64Array(offsets[shape.tokens]!);
  const scores = new Float64Array(shape.tokens);
  const acc = new Float64Array(headDim);
  for (let t = 0; t < shape.tokens; t++) {
    const from = first[t]!;
    const span = t - from + 1;
    for (let h = 0; h < numHeads; h++) {
      const qBase = (t * numHeads + h) * headDim;
      const kvHead = Math.floor(h / group) * headDim;
      let max = -Infinity;
      for (let j = from; j <= t; j++) {
        const kBase = j * kvStride + kvHead;
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += q[qBase + d]! * k[kBase + d]!;
        scores[j] = dot * scale;
        if (scores[j]! > max) max = scores[j]!;
      }
      let total = 0;
      for (let j = from; j <= t; j++) total += scores[j] = Math.exp(scores[j]! - max);
      const wBase = offsets[t]! + h * span;
      acc.fill(0);
      for (let j = from; j <= t; j++) {
        const p = scores[j]! / total;
        weights[wBase + j - from] = p;
        const vBase = j * kvStride + kvHead;
        for (let d = 0; d < headDim; d++) acc[d] += p * v[vBase + d]!;
      }
      for (let d = 0; d < headDim; d++) out[qBase + d] = acc[d]!;
    }
  }
  return { first, offsets, weights };
}

/** dq, dk, dv += the gradients given dOut, the forward's inputs and its softmax weights. */
export function referenceAttentionBackward(
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  dOut: Float32Array,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  saved: AttentionWeights,
  shape: AttentionShape,
): void {
  const { numHeads, numKVHeads, headDim, scale } = shape;
  const group = numHeads / numKVHeads;
  const kvStride = numKVHeads * headDim;
  const { first, offsets, weights } = saved;
  const dScores = new Float64Array(shape.tokens);
  const dqAcc = new Float64Array(headDim);
  for (let t = 0; t < shape.tokens; t++) {
    const from = first[t]!;
    const span = t - from + 1;
    for (let h = 0; h < numHeads; h++) {
      const qBase = (t * numHeads + h) * headDim;
      const kvHead = Math.floor(h / group) * headDim;
      const wBase = offsets[t]! + h * span;
      // d softmax: dS_j = p_j (dP_j − Σ_i p_i dP_i), dP_j = dOut · v_j.
      let weighted = 0;
      for (let j = from; j <= t; j++) {
        const vBase = j * kvStride + kvHead;
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += dOut[qBase + d]! * v[vBase + d]!;
        dScores[j] = dot;
        weighted += weights[wBase + j - from]! * dot;
      }
      dqAcc.fill(0);
      for (let j = from; j <= t; j++) {
        const p = weights[wBase + j - from]!;
        const ds = p * (dScores[j]! - weighted) * scale;
        const kBase = j * kvStride + kvHead;
        for (let d = 0; d < headDim; d++) {
          dqAcc[d] += ds * k[kBase + d]!;
          dk[kBase + d] = dk[kBase + d]! + ds * q[qBase + d]!;
          dv[kBase + d] = dv[kBase + d]! + p * dOut[qBase + d]!;
        }
      }
      for (let d = 0; d < headDim; d++) dq[qBase + d] = dq[qBase + d]! + dqAcc[d]!;
    }
  }
}
