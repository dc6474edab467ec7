/**
 * The host halves of training's light ops on the worker pool: the
 * cross-entropy (assembly/train-loss.ts), whose logits are read and gradient
 * written in place when they live in the arena (the head's chunk of logits
 * does), else staged in and copied back, the threads splitting the rows; and
 * the transposed blocks of float weights (assembly/transpose.ts), read where
 * the weights live in the arena and written in place into a block there.
 */
import { InferenceError } from "@infer/core";
import type { WeightMatrix } from "../types.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { floatToBits, JobArgs, Op } from "./protocol.js";

export class TrainOpsHost {
  private readonly logitStage: Scratch;
  private readonly targetStage: Scratch;
  private readonly lossStage: Scratch;
  private readonly transposeStage: Scratch;
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.logitStage = ctx.scratch();
    this.targetStage = ctx.scratch();
    this.lossStage = ctx.scratch();
    this.transposeStage = ctx.scratch();
  }

  /** Kernels.crossEntropy. */
  readonly crossEntropy = (logits: Float32Array, targets: Int32Array, rows: number, vocab: number, losses: Float64Array, gradScale: number, gradient: boolean): void => {
    const { ctx } = this;
    if (!Number.isInteger(rows) || rows < 0 || !Number.isInteger(vocab) || vocab < 1) throw new InferenceError("INTERNAL", `crossEntropy: [${rows}, ${vocab}] is not a shape`);
    if (logits.length < rows * vocab || targets.length < rows || losses.length < rows) throw new InferenceError("INTERNAL", `crossEntropy: buffers too small for [${rows}, ${vocab}]`);
    for (let r = 0; r < rows; r++) {
      const target = targets[r]!;
      if (!(Number.isInteger(target) && target < vocab)) throw new InferenceError("INTERNAL", `crossEntropy: target ${target} of row ${r} is past the vocabulary of ${vocab}`);
    }
    ctx.checkOpen();
    if (rows === 0) return;
    const count = rows * vocab;
    const logitsAt = ctx.floatsIn(logits, count, this.logitStage);
    const targetsAt = this.targetStage.ensure(rows * 4);
    ctx.arena.heapInts.set(targets.subarray(0, rows), targetsAt >> 2);
    const lossesAt = this.lossStage.ensure(rows * 8);
    const args = this.args.clear().add(logitsAt).add(targetsAt).add(lossesAt).add(rows).add(vocab).add(floatToBits(gradScale)).add(gradient ? 1 : 0);
    ctx.pool.run(Op.CROSS_ENTROPY, args, Math.min(rows, ctx.threadsFor(count * 4)));
    losses.set(new Float64Array(ctx.arena.heap.buffer, lossesAt, rows));
    if (gradient) ctx.copyOut(logits, logitsAt, count);
  };

  /** Kernels.transposeColumns. */
  readonly transposeColumns = (w: WeightMatrix, size: number, from: number, count: number, out: Uint8Array): void => {
    const { ctx } = this;
    const { rows, cols, data } = w;
    if ((size !== 2 && size !== 4) || !Number.isInteger(from) || !Number.isInteger(count) || from < 0 || count < 0 || from + count > cols) {
      throw new InferenceError("INTERNAL", `transposeColumns: columns ${from} + ${count} of [${rows}, ${cols}] in ${size}-byte elements`);
    }
    const bytes = count * rows * size;
    if (data.byteLength < rows * cols * size || out.byteLength < bytes) throw new InferenceError("INTERNAL", `transposeColumns: buffers too small for [${rows}, ${cols}]`);
    ctx.checkOpen();
    if (bytes === 0) return;
    const srcAt = ctx.residentAddress(data, rows * cols * size);
    const inPlace = ctx.arena.addressOf(out);
    const dstAt = inPlace ?? this.transposeStage.ensure(bytes);
    const args = this.args.clear().add(srcAt).add(cols).add(from).add(count).add(dstAt).add(rows).add(size);
    ctx.pool.run(Op.TRANSPOSE, args, Math.min(Math.ceil(rows / 4), ctx.threadsFor(bytes)));
    if (inPlace === undefined) out.set(ctx.arena.heap.subarray(dstAt, dstAt + bytes));
  };
}
