/**
 * Plain TypeScript kernels: the exact reference the WebAssembly kernels are
 * tested against. Weights stay in their stored encoding; matmul dequantizes
 * one row at a time into a scratch buffer and accumulates in float64.
 */
import { InferenceError } from "@infer/core";
import { GgmlType } from "@infer/formats";
import { kvEncodingOf, type AttentionParams, type KVBuffer, type Kernels, type WeightMatrix } from "./types.js";
import { dequantizeMatrixRow, float32View } from "./dequant.js";
import { kvElementReader } from "./kv-codec.js";

export function referenceMatmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void {
  const { rows, cols } = w;
  if (x.length < batch * cols || out.length < batch * rows) {
    throw new InferenceError("INTERNAL", `matmul buffers too small for [${batch}, ${cols}] x [${rows}, ${cols}]ᵀ`);
  }
  const f32 = w.type === GgmlType.F32 ? float32View(w) : undefined;
  const scratch = f32 ? undefined : new Float32Array(cols); // [cols]: one dequantized row
  for (let r = 0; r < rows; r++) {
    let row: Float32Array;
    let base: number;
    if (f32) {
      row = f32;
      base = r * cols;
    } else {
      dequantizeMatrixRow(w, r, scratch!);
      row = scratch!;
      base = 0;
    }
    for (let b = 0; b < batch; b++) {
      const xBase = b * cols;
      let sum = 0;
      for (let c = 0; c < cols; c++) sum += row[base + c]! * x[xBase + c]!;
      out[b * rows + r] = sum;
    }
  }
}

/**
 * Reference causal attention with grouped-query heads, sliding window and
 * optional soft-capping; see AttentionKernel for the layouts. An f16 or Q8_0
 * cache is decoded element by element as it is read.
 */
export function referenceAttention(
  out: Float32Array,
  q: Float32Array,
  keys: KVBuffer,
  values: KVBuffer,
  p: AttentionParams,
): void {
  if (kvEncodingOf(keys) !== kvEncodingOf(values)) {
    throw new InferenceError("INTERNAL", "attention: keys and values must share one encoding");
  }
  const key = kvElementReader(keys);
  const value = kvElementReader(values);
  const { numHeads, numKVHeads, headDim, slotLength, scale, window, softcap } = p;
  if (numHeads % numKVHeads !== 0) {
    throw new InferenceError("INTERNAL", `${numHeads} query heads do not group over ${numKVHeads} KV heads`);
  }
  const group = numHeads / numKVHeads;
  const kvStride = numKVHeads * headDim;
  const scores = new Float64Array(slotLength); // [positions visible to one token]
  const acc = new Float64Array(headDim); // [headDim]
  for (let t = 0; t < p.tokens; t++) {
    const position = p.positions[t]!;
    const slotBase = p.seqIds[t]! * slotLength * kvStride;
    const first = window > 0 ? Math.max(0, position - window + 1) : 0;
    for (let h = 0; h < numHeads; h++) {
      const qBase = (t * numHeads + h) * headDim;
      const kvHeadOffset = Math.floor(h / group) * headDim;
      let max = -Infinity;
      for (let j = first; j <= position; j++) {
        const kBase = slotBase + j * kvStride + kvHeadOffset;
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += q[qBase + d]! * key(kBase + d);
        let score = dot * scale;
        if (softcap > 0) score = softcap * Math.tanh(score / softcap);
        scores[j] = score;
        if (score > max) max = score;
      }
      let total = 0;
      for (let j = first; j <= position; j++) {
        const e = Math.exp(scores[j]! - max);
        scores[j] = e;
        total += e;
      }
      acc.fill(0);
      for (let j = first; j <= position; j++) {
        const weight = scores[j]! / total;
        const vBase = slotBase + j * kvStride + kvHeadOffset;
        for (let d = 0; d < headDim; d++) acc[d] += weight * value(vBase + d);
      }
      for (let d = 0; d < headDim; d++) out[qBase + d] = acc[d]!;
    }
  }
}

export const referenceKernels: Kernels = {
  name: "reference",
  matmul: referenceMatmul,
  attention: referenceAttention,
};
