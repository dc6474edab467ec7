/**
 * Causal self-attention with grouped-query heads over packed sequences,
 * forward and backward. The forward keeps each query's softmax weights (the
 * backward reads them); scores are summed in float64.
 *
 * Layouts: q and the output [tokens, numHeads, headDim]; k and v
 * [tokens, numKVHeads, headDim]; query head h reads KV head
 * floor(h / (numHeads / numKVHeads)). Token t sees tokens first(t) .. t, where
 * first(t) is its sequence's first token (`sequenceStart[t]`), or later under a window.
 */

export interface AttentionShape {
  tokens: number;
  numHeads: number;
  numKVHeads: number;
  headDim: number;
  /** [tokens] index of the first token of each token's sequence. */
  sequenceStart: Int32Array;
  /** Multiplier on q·k. */
  scale: number;
  /** Sliding window in tokens; 0 = the whole sequence so far. */
  window: number;
}

/** The softmax weights of a forward: for token t and head h, span(t) weights from weightOffset(t) + h * span(t). */
export interface AttentionWeights {
  /** [tokens] first token each query sees. */
  first: Int32Array;
  /** [tokens + 1] where each token's weights start (all heads), prefix sums of numHeads * span. */
  offsets: Int32Array;
  weights: Float64Array;
}

function visibleRange(shape: AttentionShape): { first: Int32Array; offsets: Int32Array } {
  const first = new Int32Array(shape.tokens);
  const offsets = new Int32Array(shape.tokens + 1);
  for (let t = 0; t < shape.tokens; t++) {
    const start = shape.sequenceStart[t]!;
    first[t] = shape.window > 0 ? Math.max(start, t - shape.window + 1) : start;
    offsets[t + 1] = offsets[t]! + shape.numHeads * (t - first[t]! + 1);
  }
  return { first, offsets };
}

export function attentionForward(out: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, shape: AttentionShape): AttentionWeights {
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
export function attentionBackward(
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
