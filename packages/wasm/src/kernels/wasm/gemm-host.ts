/**
 * The host half of Kernels.gemm (assembly/gemm.ts): validates the shape, reads
 * operands in place where they live in the arena (else stages them), and posts
 * one GEMM job whose tiles of c the threads claim.
 */
import { InferenceError } from "@infer/core";
import type { GemmShape } from "../types.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { JobArgs, Op } from "./protocol.js";

/** Columns of c per tile: a multiple of the kernel's panels of 8. */
const TILE_COLUMNS = 128;
/** Tiles each thread should get to claim, so the last one ends close to the others. */
const TILES_PER_THREAD = 4;

export class GemmHost {
  private readonly aStage: Scratch;
  private readonly bStage: Scratch;
  private readonly cStage: Scratch;
  private readonly packing: Scratch;
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.aStage = ctx.scratch();
    this.bStage = ctx.scratch();
    this.cStage = ctx.scratch();
    this.packing = ctx.scratch();
  }

  gemm(c: Float32Array, a: Float32Array, b: Float32Array, shape: GemmShape): void {
    this.ctx.checkOpen();
    const { m, n, k } = shape;
    if (![m, n, k].every((d) => Number.isInteger(d) && d >= 1)) throw new InferenceError("INTERNAL", `gemm shape [${m}, ${k}] x [${k}, ${n}] is not positive integers`);
    if (a.length < m * k || b.length < k * n || c.length < m * n) throw new InferenceError("INTERNAL", `gemm buffers too small for [${m}, ${k}] x [${k}, ${n}]`);
    const { arena, exports, pool } = this.ctx;
    const aAddress = this.ctx.floatsIn(a, m * k, this.aStage);
    const bAddress = this.ctx.floatsIn(b, k * n, this.bStage);
    // c is read too when accumulating: a staged c starts as a copy.
    let cAddress = arena.addressOf(c);
    if (cAddress === undefined) cAddress = shape.accumulate ? this.ctx.floatsIn(c, m * n, this.cStage) : this.cStage.ensure(m * n * 4);
    // a(i, kk) at a + i * aRow + kk * aStep; b(kk, j) at b + kk * bRow + j * 4, or transposed at b + j * bRow + kk * 4.
    const [aRow, aStep] = shape.transposeA ? [4, m * 4] : [k * 4, 4];
    const bRow = shape.transposeB ? k * 4 : n * 4;
    const threads = this.ctx.threadsFor(4 * (m * k + k * n));
    const scratchStride = Math.ceil(exports.gemmScratchBytes() / 64) * 64;
    const scratch = this.packing.ensure(scratchStride * pool.threads);
    // Tiles of TILE_COLUMNS columns and all of m, m split (in multiples of 4) where that leaves too few.
    const nChunk = Math.min(TILE_COLUMNS, Math.ceil(n / 8) * 8);
    const nTiles = Math.ceil(n / nChunk);
    const mSplits = Math.max(1, Math.min(Math.ceil(m / 4), Math.ceil((TILES_PER_THREAD * threads) / nTiles)));
    const mChunk = Math.ceil(m / mSplits / 4) * 4;
    const args = this.args.clear().add(cAddress).add(n * 4).add(aAddress).add(aRow).add(aStep).add(bAddress).add(bRow).add(shape.transposeB ? 1 : 0);
    args.add(m).add(n).add(k).add(shape.accumulate ? 1 : 0).add(scratch).add(scratchStride).add(mChunk).add(nChunk);
    pool.run(Op.GEMM, args, threads);
    this.ctx.copyOut(c, cAddress, m * n);
  }
}
