/**
 * The host half of training's cross-entropy (assembly/train-loss.ts): the
 * logits are read and their gradient written in place when they live in the
 * arena (the head's chunk of logits does), else staged in and copied back;
 * the threads split the rows.
 */
import { InferenceError } from "@infer/core";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { floatToBits, JobArgs, Op } from "./protocol.js";

export class TrainLossHost {
  private readonly logitStage: Scratch;
  private readonly targetStage: Scratch;
  private readonly lossStage: Scratch;
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.logitStage = ctx.scratch();
    this.targetStage = ctx.scratch();
    this.lossStage = ctx.scratch();
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
}
