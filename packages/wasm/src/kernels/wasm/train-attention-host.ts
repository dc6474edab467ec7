/**
 * The host half of training's attention (assembly/train-attention.ts): stages
 * the activations in the arena, posts one job whose items the threads split,
 * and copies the results back. The forward's items are (token, KV head) pairs,
 * interleaved across threads since later tokens see more; the backward's are
 * (sequence, KV head) pairs, each owning the key and value gradient rows it adds to.
 */
import { InferenceError } from "@infer/core";
import { firstVisible, type TrainingAttentionKernel, type TrainingAttentionShape } from "../types.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { floatToBits, JobArgs, Op } from "./protocol.js";

/** Buffers a call stages, by role. */
const STAGES = ["out", "lse", "q", "k", "v", "dOut", "dq", "dk", "dv", "ints", "scratch"] as const;

export class TrainAttentionHost implements TrainingAttentionKernel {
  private readonly stages: Record<(typeof STAGES)[number], Scratch>;
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.stages = Object.fromEntries(STAGES.map((name) => [name, ctx.scratch()])) as Record<(typeof STAGES)[number], Scratch>;
  }

  supports(shape: TrainingAttentionShape): boolean {
    return shape.headDim % 4 === 0 && shape.numHeads % shape.numKVHeads === 0;
  }

  forward(out: Float32Array, logSumExp: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, shape: TrainingAttentionShape): void {
    const { tokens, numHeads, numKVHeads, headDim } = this.check(shape, q, k, v);
    if (out.length < q.length || logSumExp.length < tokens * numHeads) throw new InferenceError("INTERNAL", "trainingAttention.forward: output buffers too small");
    if (tokens === 0) return;
    const { ctx, stages } = this;
    const first = firstVisible(shape);
    const firstAt = this.stageInts(first);
    const outAt = stages.out.ensure(q.length * 4);
    const lseAt = stages.lse.ensure(tokens * numHeads * 4);
    const { scratch, stride, work } = this.scratch(first, shape);
    const args = this.args.clear().add(outAt).add(lseAt);
    args.add(ctx.floatsIn(q, q.length, stages.q)).add(ctx.floatsIn(k, k.length, stages.k)).add(ctx.floatsIn(v, v.length, stages.v)).add(firstAt);
    args.add(numHeads).add(numKVHeads).add(headDim).add(floatToBits(shape.scale)).add(scratch).add(stride).add(tokens * numKVHeads);
    ctx.pool.run(Op.TRAIN_ATTENTION_FORWARD, args, ctx.threadsFor(work));
    ctx.copyOut(out, outAt, q.length);
    ctx.copyOut(logSumExp, lseAt, tokens * numHeads);
  }

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
  ): void {
    const { tokens, numHeads, numKVHeads, headDim } = this.check(shape, q, k, v);
    if (dq.length < q.length || dOut.length < q.length || dk.length < k.length || dv.length < v.length || logSumExp.length < tokens * numHeads) {
      throw new InferenceError("INTERNAL", "trainingAttention.backward: gradient buffers too small");
    }
    if (tokens === 0) return;
    const { ctx, stages } = this;
    const first = firstVisible(shape);
    // Sequence bounds: each token whose sequence start is itself opens one.
    const bounds: number[] = [];
    for (let t = 0; t < tokens; t++) if (shape.sequenceStart[t] === t) bounds.push(t);
    bounds.push(tokens);
    const ints = new Int32Array(tokens + bounds.length);
    ints.set(first);
    ints.set(bounds, tokens);
    const firstAt = this.stageInts(ints);
    const { scratch, stride, work } = this.scratch(first, shape);
    const dqAt = ctx.floatsIn(dq, q.length, stages.dq);
    const dkAt = ctx.floatsIn(dk, k.length, stages.dk);
    const dvAt = ctx.floatsIn(dv, v.length, stages.dv);
    const args = this.args.clear().add(dqAt).add(dkAt).add(dvAt).add(ctx.floatsIn(dOut, q.length, stages.dOut)).add(ctx.floatsIn(logSumExp, tokens * numHeads, stages.lse));
    args.add(ctx.floatsIn(q, q.length, stages.q)).add(ctx.floatsIn(k, k.length, stages.k)).add(ctx.floatsIn(v, v.length, stages.v));
    args.add(firstAt).add(firstAt + tokens * 4).add(numHeads).add(numKVHeads).add(headDim).add(floatToBits(shape.scale));
    args.add(scratch).add(stride).add((bounds.length - 1) * numKVHeads);
    ctx.pool.run(Op.TRAIN_ATTENTION_BACKWARD, args, ctx.threadsFor(3 * work));
    ctx.copyOut(dq, dqAt, q.length);
    ctx.copyOut(dk, dkAt, k.length);
    ctx.copyOut(dv, dvAt, v.length);
  }

  private check(shape: TrainingAttentionShape, q: Float32Array, k: Float32Array, v: Float32Array): TrainingAttentionShape {
    const { tokens, numHeads, numKVHeads, headDim, sequenceStart } = shape;
    this.ctx.checkOpen();
    if (!this.supports(shape) || !Number.isInteger(tokens) || tokens < 0 || numKVHeads < 1 || headDim < 4) {
      throw new InferenceError("INTERNAL", `trainingAttention: unsupported shape ${numHeads} / ${numKVHeads} heads of ${headDim}`);
    }
    if (q.length < tokens * numHeads * headDim || k.length < tokens * numKVHeads * headDim || v.length < k.length || sequenceStart.length < tokens) {
      throw new InferenceError("INTERNAL", "trainingAttention: buffers too small for the shape");
    }
    for (let t = 0; t < tokens; t++) {
      const start = sequenceStart[t]!;
      // Consecutive sequences: a token starts its own or continues its predecessor's.
      if (!(start === t || (t > 0 && start === sequenceStart[t - 1]))) throw new InferenceError("INTERNAL", `trainingAttention: token ${t}'s sequence start ${start} is not consecutive`);
    }
    return shape;
  }

  private stageInts(values: Int32Array): number {
    const at = this.stages.ints.ensure(values.length * 4);
    this.ctx.arena.heapInts.set(values, at >> 2);
    return at;
  }

  /** Per-thread scratch for the widest query, and the bytes of keys and values the call reads (for the thread count). */
  private scratch(first: Int32Array, shape: TrainingAttentionShape): { scratch: number; stride: number; work: number } {
    let widest = 1;
    let visible = 0;
    for (let t = 0; t < first.length; t++) {
      widest = Math.max(widest, t - first[t]! + 1);
      visible += t - first[t]! + 1;
    }
    const stride = Math.ceil(this.ctx.exports.trainAttentionScratchBytes(widest) / 64) * 64;
    return { scratch: this.stages.scratch.ensure(stride * this.ctx.pool.threads), stride, work: visible * shape.numHeads * shape.headDim * 8 };
  }
}
