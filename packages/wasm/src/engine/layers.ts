/**
 * Steps every architecture's blocks are built from: projections, norms, and
 * self-attention through the KV cache. Each returns a new [tokens, dim] buffer
 * from the forward's scratch memory: valid until the next residual add, no
 * longer (see scratch.ts), so a block must not keep buffers across one.
 *
 * Buffer rules, for the blocks in arch/:
 *  - x, the residual stream, belongs to the forward (ForwardScratch's
 *    `forwardFloats`); in the blocks only `residual` writes it, in place.
 *  - Every other buffer here comes from `scratch.floats`, and the `residual`
 *    that ends a sublayer frees them all, its own `y` included; the next
 *    sublayer and layer reuse that memory, so nothing carries over.
 *  - Some steps work in place: `selfAttention` rotates q and k, `normHeads`
 *    normalizes its input, and `gatedMlp` overwrites its gate products.
 *  - What lasts past a forward is in the KV cache: `selfAttention` copies the
 *    batch's k and v into it before it returns. The query observer gets q only
 *    for the length of its call and must copy what it keeps.
 */
import type { AttentionKernel, Kernels, WeightMatrix } from "../kernels/types.js";
import { addBias, addInPlace, applyRope, gatedActivation, rmsNorm, type Activation } from "../kernels/ops.js";
import type { KVCache } from "./cache.js";
import type { ModelConfig } from "./config.js";
import type { ForwardScratch } from "./scratch.js";
import { addLoraDelta, type LoraDeltas } from "./lora.js";

/** What one forward call's layers share. */
export interface ForwardContext {
  kernels: Kernels;
  attention: AttentionKernel;
  config: ModelConfig;
  cache: KVCache;
  /** Tokens in the batch. */
  tokens: number;
  /** [tokens] */
  positions: Int32Array;
  /** [tokens] */
  seqIds: Int32Array;
  /** Where this forward's intermediate buffers come from (lifetimes in scratch.ts). */
  scratch: ForwardScratch;
  /** Sees each layer's rotated queries once the batch's keys are cached (attention probes). */
  observeQueries?: QueryObserver;
  /** LoRA deltas by base matrix (lora.ts): projections add B' (A x) for the matrices that have one. */
  lora?: LoraDeltas;
}

/** q: [tokens, numHeads, headDim] after RoPE, valid only during the call; window: the layer's (0 = full). */
export type QueryObserver = (layer: number, q: Float32Array, window: number) => void;

/** x [tokens, w.cols] → [tokens, w.rows] (+ bias [w.rows]). */
export function linear(ctx: ForwardContext, w: WeightMatrix, x: Float32Array, bias?: Float32Array): Float32Array {
  const out = ctx.scratch.floats(ctx.tokens * w.rows);
  ctx.kernels.matmul(out, w, x, ctx.tokens);
  addLoraDelta(ctx, out, w, x);
  if (bias) biasAdd(ctx.kernels, out, bias, ctx.tokens);
  return out;
}

/**
 * Projections sharing one input, x [tokens, cols] → [tokens, ws[i].rows] each
 * (+ biases[i]): one kernel call when the kernels offer matmulMany, so the
 * input is prepared once and the threads are woken once.
 */
export function projections(
  ctx: ForwardContext,
  ws: readonly WeightMatrix[],
  x: Float32Array,
  biases: readonly (Float32Array | undefined)[] = [],
): Float32Array[] {
  const outs = ws.map((w) => ctx.scratch.floats(ctx.tokens * w.rows));
  matmulMany(ctx, outs, ws, x);
  ws.forEach((w, i) => addLoraDelta(ctx, outs[i]!, w, x));
  biases.forEach((bias, i) => bias && biasAdd(ctx.kernels, outs[i]!, bias, ctx.tokens));
  return outs;
}

function matmulMany(ctx: ForwardContext, outs: Float32Array[], ws: readonly WeightMatrix[], x: Float32Array): void {
  if (ctx.kernels.matmulMany) ctx.kernels.matmulMany(outs, ws, x, ctx.tokens);
  else ws.forEach((w, i) => ctx.kernels.matmul(outs[i]!, w, x, ctx.tokens));
}

// The light steps run on the kernels' own versions where they have them (the same bits as ops.ts's).

function biasAdd(kernels: Kernels, x: Float32Array, bias: Float32Array, rows: number): void {
  if (kernels.addBias) kernels.addBias(x, bias, rows);
  else addBias(x, bias, rows);
}

/** RoPE of x [tokens, heads, headDim] in place at the batch's positions. */
function rotate(ctx: ForwardContext, x: Float32Array, heads: number, options: AttentionOptions): void {
  const { headDim, ropeMode } = ctx.config;
  const magnitude = options.ropeMagnitude ?? 1;
  if (ctx.kernels.rope) ctx.kernels.rope(x, ctx.tokens, heads, headDim, ctx.positions, options.inverseFrequencies, ropeMode, magnitude);
  else applyRope(x, ctx.tokens, heads, headDim, ctx.positions, options.inverseFrequencies, ropeMode, magnitude);
}

/** RMSNorm of x [rows, dim] with weight [dim] into out (which may be x), with the model's eps and weighting. */
export function rmsNormRows(kernels: Kernels, config: ModelConfig, out: Float32Array, x: Float32Array, weight: Float32Array, rows: number, dim: number): void {
  if (kernels.rmsNorm) kernels.rmsNorm(out, x, weight, rows, dim, config.rmsEps, config.normUnitOffset);
  else rmsNorm(out, x, weight, rows, dim, config.rmsEps, config.normUnitOffset);
}

/** RMSNorm of each row of x [tokens, dim] with weight [dim], into a new buffer. */
export function norm(ctx: ForwardContext, x: Float32Array, weight: Float32Array): Float32Array {
  const dim = weight.length;
  const out = ctx.scratch.floats(ctx.tokens * dim);
  rmsNormRows(ctx.kernels, ctx.config, out, x, weight, ctx.tokens, dim);
  return out;
}

/** Per-head RMSNorm of x [tokens, heads, headDim] in place (q/k norms). */
export function normHeads(ctx: ForwardContext, x: Float32Array, weight: Float32Array, heads: number): void {
  rmsNormRows(ctx.kernels, ctx.config, x, x, weight, ctx.tokens * heads, ctx.config.headDim);
}

/**
 * The residual connection, x [tokens, hidden] += y, which ends a sublayer
 * (attention or MLP): every scratch buffer made since the last one went into
 * y, so all are free afterwards (scratch.ts). A block that would read one
 * after adding (a parallel attention + MLP block, say) needs an add that
 * keeps them.
 */
export function residual(ctx: ForwardContext, x: Float32Array, y: Float32Array): void {
  if (ctx.kernels.addInPlace) ctx.kernels.addInPlace(x, y, x.length);
  else addInPlace(x, y, x.length);
  ctx.scratch.freeLayerBuffers();
}

/** Copies rows [tokens, total] columns [start, start + width) into a new [tokens, width] buffer. */
export function columns(ctx: ForwardContext, x: Float32Array, total: number, start: number, width: number): Float32Array {
  const out = ctx.scratch.floats(ctx.tokens * width);
  for (let t = 0; t < ctx.tokens; t++) out.set(x.subarray(t * total + start, t * total + start + width), t * width);
  return out;
}

export interface AttentionOptions {
  /** Inverse RoPE frequencies, [rotaryDim / 2]. */
  inverseFrequencies: Float64Array;
  /** Scale of the rotated dims (LongRoPE's attention factor); default 1. */
  ropeMagnitude?: number;
  /** Attention window in tokens (0 = full). */
  window: number;
}

/**
 * RoPE on q [tokens, numHeads, headDim] and k [tokens, numKVHeads, headDim],
 * k and v stored in the cache of `layer` at each token's (seq, position), then
 * causal attention of each query over its sequence's cached positions.
 * Returns [tokens, numHeads * headDim].
 */
export function selfAttention(
  ctx: ForwardContext,
  layer: number,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  options: AttentionOptions,
): Float32Array {
  const { numHeads, numKVHeads, headDim, attentionScale, attentionSoftcap } = ctx.config;
  rotate(ctx, q, numHeads, options);
  rotate(ctx, k, numKVHeads, options);
  const cache = ctx.cache;
  const kvDim = numKVHeads * headDim;
  const keys = cache.keys[layer]!;
  const values = cache.values[layer]!;
  // Tokens of one sequence at consecutive positions (a prompt chunk) are consecutive cache rows: one store per run.
  for (let t = 0; t < ctx.tokens; ) {
    let end = t + 1;
    while (end < ctx.tokens && ctx.seqIds[end] === ctx.seqIds[t] && ctx.positions[end] === ctx.positions[end - 1]! + 1) end++;
    const at = cache.offset(ctx.seqIds[t]!, ctx.positions[t]!);
    // The whole batch as one run (a decode step, one sequence's prompt chunk) stores k and v as they are, no views.
    const whole = t === 0 && end === ctx.tokens;
    cache.store(layer, at, whole ? k : k.subarray(t * kvDim, end * kvDim), whole ? v : v.subarray(t * kvDim, end * kvDim));
    t = end;
  }
  ctx.observeQueries?.(layer, q, options.window);
  const out = ctx.scratch.floats(ctx.tokens * numHeads * headDim);
  ctx.attention(out, q, keys, values, {
    tokens: ctx.tokens,
    numHeads,
    numKVHeads,
    headDim,
    positions: ctx.positions,
    seqIds: ctx.seqIds,
    slotLength: cache.contextLength,
    scale: attentionScale,
    window: options.window,
    softcap: attentionSoftcap,
  });
  return out;
}

/** down(act(gate(x)) * up(x)) with separate gate [ffn, hidden] and up [ffn, hidden]; down [hidden, ffn]. */
export function gatedMlp(
  ctx: ForwardContext,
  x: Float32Array,
  gate: WeightMatrix,
  up: WeightMatrix,
  down: WeightMatrix,
  activation: Activation,
): Float32Array {
  const g = ctx.scratch.floats(ctx.tokens * gate.rows); // [tokens, ffn]
  // The fused kernel applies the activation before a LoRA delta could be added to gate or up.
  if (ctx.kernels.matmulGated && !ctx.lora?.has(gate) && !ctx.lora?.has(up)) {
    // Gate, up and the activation in one kernel call: one thread wake-up, no second pass over g.
    ctx.kernels.matmulGated(g, gate, up, x, ctx.tokens, activation);
  } else {
    const u = ctx.scratch.floats(ctx.tokens * up.rows); // [tokens, ffn]
    matmulMany(ctx, [g, u], [gate, up], x);
    addLoraDelta(ctx, g, gate, x);
    addLoraDelta(ctx, u, up, x);
    gatedActivation(g, g, u, g.length, activation);
  }
  return linear(ctx, down, g);
}
