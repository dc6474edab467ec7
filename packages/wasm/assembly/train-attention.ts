// Training's causal attention over packed sequences, forward and backward, in
// f32x4 (src/train/ops/attention.ts holds the float64 TypeScript reference and
// the layouts: q, out, dq, dOut [tokens, numHeads * headDim]; k, v, dk, dv
// [tokens, numKVHeads * headDim]; first: [tokens] i32, the first token each
// query sees). headDim is a multiple of 4.
//
// The forward keeps no softmax weights: per query row, only log Σ exp(score),
// from which the backward recomputes each weight as exp(score − lse) (what
// flash attention keeps), so a layer's saved state is [tokens, numHeads]
// floats instead of the weights of every visible pair.
//
// Threads split the forward by (token, KV head) items and the backward by
// (sequence, KV head) items: a sequence's keys and values are read only by its
// own queries, so each backward item owns the dk and dv rows it adds to.

import { exp4 } from "./exp";

/** Σ a[d] b[d] over headDim floats (a multiple of 4), two chains of f32x4. */
function dotHead(a: usize, b: usize, headDim: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let d = 0;
  for (; d + 8 <= headDim; d += 8) {
    const o = <usize>d << 2;
    acc0 = f32x4.add(acc0, f32x4.mul(v128.load(a + o), v128.load(b + o)));
    acc1 = f32x4.add(acc1, f32x4.mul(v128.load(a + o, 16), v128.load(b + o, 16)));
  }
  if (d < headDim) acc0 = f32x4.add(acc0, f32x4.mul(v128.load(a + (<usize>d << 2)), v128.load(b + (<usize>d << 2))));
  const sum = f32x4.add(acc0, acc1);
  return f32x4.extract_lane(sum, 0) + f32x4.extract_lane(sum, 1) + f32x4.extract_lane(sum, 2) + f32x4.extract_lane(sum, 3);
}

/** y[d] += a * x[d] over headDim floats. */
function axpyHead(y: usize, a: f32, x: usize, headDim: i32): void {
  const av = f32x4.splat(a);
  for (let d = 0; d < headDim; d += 4) {
    const o = <usize>d << 2;
    v128.store(y + o, f32x4.add(v128.load(y + o), f32x4.mul(av, v128.load(x + o))));
  }
}

/**
 * scores[j] = exp(scores[j] − shift) for j < span, in f32x4 (exp4), the lanes
 * past span padded with −∞ first (weight 0); returns their sum.
 */
function expShifted(scores: usize, span: i32, shift: f32): f32 {
  for (let j = span; j < ((span + 3) & ~3); j++) store<f32>(scores + (<usize>j << 2), -Infinity);
  const s = f32x4.splat(shift);
  let total = f32x4.splat(0);
  for (let j = 0; j < span; j += 4) {
    const at = scores + (<usize>j << 2);
    const e = exp4(f32x4.sub(v128.load(at), s));
    v128.store(at, e);
    total = f32x4.add(total, e);
  }
  return f32x4.extract_lane(total, 0) + f32x4.extract_lane(total, 1) + f32x4.extract_lane(total, 2) + f32x4.extract_lane(total, 3);
}

/** Floats of scratch one thread needs for a query that sees `span` tokens (scores and, backward, their gradients). */
export function trainAttentionScratchBytes(span: i32): i32 {
  return 2 * (((span + 3) & ~3) << 2);
}

/**
 * Forward for items [itemStart, itemEnd) step itemStep, item = token * numKVHeads + kvHead:
 * out rows of the group's query heads, and lse [tokens, numHeads] = log Σ_j exp(scale q·k_j).
 */
export function trainAttentionForward(
  out: usize,
  lse: usize,
  q: usize,
  k: usize,
  v: usize,
  first: usize,
  numHeads: i32,
  numKVHeads: i32,
  headDim: i32,
  scale: f32,
  scores: usize,
  itemStart: i32,
  itemEnd: i32,
  itemStep: i32,
): void {
  const group = numHeads / numKVHeads;
  const headBytes = <usize>headDim << 2;
  const kvStride = <usize>numKVHeads * headBytes;
  const qStride = <usize>numHeads * headBytes;
  for (let item = itemStart; item < itemEnd; item += itemStep) {
    const t = item / numKVHeads;
    const kvHead = item % numKVHeads;
    const from = load<i32>(first + (<usize>t << 2));
    const span = t - from + 1;
    const keys = k + <usize>from * kvStride + <usize>kvHead * headBytes;
    const values = v + <usize>from * kvStride + <usize>kvHead * headBytes;
    for (let g = 0; g < group; g++) {
      const h = kvHead * group + g;
      const qRow = q + <usize>t * qStride + <usize>h * headBytes;
      let max: f32 = -Infinity;
      for (let j = 0; j < span; j++) {
        const s = dotHead(qRow, keys + <usize>j * kvStride, headDim) * scale;
        store<f32>(scores + (<usize>j << 2), s);
        max = s > max ? s : max;
      }
      const total = expShifted(scores, span, max);
      const outRow = out + <usize>t * qStride + <usize>h * headBytes;
      memory.fill(outRow, 0, headBytes);
      const inverse: f32 = 1 / total;
      for (let j = 0; j < span; j++) axpyHead(outRow, load<f32>(scores + (<usize>j << 2)) * inverse, values + <usize>j * kvStride, headDim);
      store<f32>(lse + ((<usize>t * <usize>numHeads + <usize>h) << 2), max + <f32>Math.log(<f64>total));
    }
  }
}

/**
 * Backward for items [itemStart, itemEnd) step itemStep, item = sequence *
 * numKVHeads + kvHead, sequence s spanning tokens [bounds[s], bounds[s + 1]):
 * dq, dk, dv += the gradients given dOut and the forward's q, k, v and lse.
 * With p_j = exp(scale q·k_j − lse), dP_j = dOut·v_j and D = Σ p_j dP_j:
 * dS_j = p_j (dP_j − D) scale; dq += Σ dS_j k_j, dk_j += dS_j q, dv_j += p_j dOut.
 */
export function trainAttentionBackward(
  dq: usize,
  dk: usize,
  dv: usize,
  dOut: usize,
  lse: usize,
  q: usize,
  k: usize,
  v: usize,
  first: usize,
  bounds: usize,
  numHeads: i32,
  numKVHeads: i32,
  headDim: i32,
  scale: f32,
  scratch: usize,
  scratchStride: i32,
  itemStart: i32,
  itemEnd: i32,
  itemStep: i32,
): void {
  const group = numHeads / numKVHeads;
  const headBytes = <usize>headDim << 2;
  const kvStride = <usize>numKVHeads * headBytes;
  const qStride = <usize>numHeads * headBytes;
  const weights = scratch;
  const dWeights = scratch + (<usize>scratchStride >> 1);
  for (let item = itemStart; item < itemEnd; item += itemStep) {
    const sequence = item / numKVHeads;
    const kvHead = item % numKVHeads;
    const end = load<i32>(bounds + (<usize>(sequence + 1) << 2));
    for (let t = load<i32>(bounds + (<usize>sequence << 2)); t < end; t++) {
      const from = load<i32>(first + (<usize>t << 2));
      const span = t - from + 1;
      const kvOffset = <usize>from * kvStride + <usize>kvHead * headBytes;
      for (let g = 0; g < group; g++) {
        const h = kvHead * group + g;
        const rowOffset = <usize>t * qStride + <usize>h * headBytes;
        const qRow = q + rowOffset;
        const dORow = dOut + rowOffset;
        for (let j = 0; j < span; j++) {
          const at = <usize>j * kvStride + kvOffset;
          store<f32>(weights + (<usize>j << 2), dotHead(qRow, k + at, headDim) * scale);
          store<f32>(dWeights + (<usize>j << 2), dotHead(dORow, v + at, headDim));
        }
        expShifted(weights, span, load<f32>(lse + ((<usize>t * <usize>numHeads + <usize>h) << 2)));
        let weighted: f32 = 0;
        for (let j = 0; j < span; j++) weighted += load<f32>(weights + (<usize>j << 2)) * load<f32>(dWeights + (<usize>j << 2));
        const dqRow = dq + rowOffset;
        for (let j = 0; j < span; j++) {
          const p = load<f32>(weights + (<usize>j << 2));
          const ds = p * (load<f32>(dWeights + (<usize>j << 2)) - weighted) * scale;
          const at = <usize>j * kvStride + kvOffset;
          axpyHead(dqRow, ds, k + at, headDim);
          axpyHead(dk + at, ds, qRow, headDim);
          axpyHead(dv + at, p, dORow, headDim);
        }
      }
    }
  }
}
