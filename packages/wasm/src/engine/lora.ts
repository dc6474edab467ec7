/**
 * LoRA at inference: a projection W with an adapter pair computes
 * W x + B' (A x), B' being B with the pair's scale folded in. The deltas hang
 * off the Transformer by weight matrix, so the blocks in arch/ stay as they
 * are: layers.ts's projections add the delta of any matrix that has one.
 */
import type { Kernels, WeightMatrix } from "../kernels/types.js";
import { addInPlace } from "../kernels/ops.js";
import type { ForwardScratch } from "./scratch.js";

/** One adapted matrix's low-rank pair, as F32 matrices the kernels multiply. */
export interface LoraDelta {
  /** [rank, cols of W] */
  a: WeightMatrix;
  /** [rows of W, rank], scale included. */
  b: WeightMatrix;
}

/** The deltas of an adapter, keyed by the matrices the architecture's blocks hold. */
export type LoraDeltas = ReadonlyMap<WeightMatrix, LoraDelta>;

/** What of a forward's context the delta uses (layers.ts's ForwardContext has it all). */
export interface LoraContext {
  kernels: Kernels;
  scratch: ForwardScratch;
  tokens: number;
  lora?: LoraDeltas;
}

/** out [tokens, w.rows] += B' (A x) when w has a delta; x is w's input [tokens, w.cols]. */
export function addLoraDelta(ctx: LoraContext, out: Float32Array, w: WeightMatrix, x: Float32Array): void {
  const delta = ctx.lora?.get(w);
  if (!delta) return;
  const ax = ctx.scratch.floats(ctx.tokens * delta.a.rows); // [tokens, rank]
  ctx.kernels.matmul(ax, delta.a, x, ctx.tokens);
  const bax = ctx.scratch.floats(ctx.tokens * w.rows); // [tokens, rows]
  ctx.kernels.matmul(bax, delta.b, ax, ctx.tokens);
  if (ctx.kernels.addInPlace) ctx.kernels.addInPlace(out, bax, ctx.tokens * w.rows);
  else addInPlace(out, bax, ctx.tokens * w.rows);
}
