/**
 * The host half of Kernels.dequantizeTransposed (assembly/index.ts): a panel of
 * a weight matrix dequantized to float32 and transposed, the rows split across
 * the threads. The panel is written in place when `out` lives in the arena
 * (training's workspace), else staged and copied out.
 */
import { InferenceError } from "@infer/core";
import { typeInfo } from "@infer/formats";
import { plainTypeOf, type MatrixType, type WeightMatrix } from "../types.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { storedRowBytes, WASM_TYPES } from "./matmul-host.js";
import { JobArgs, Op } from "./protocol.js";

/** Columns the kernel moves at once for the float types (one vector of four). */
const FLOAT_ALIGN = 4;

/** dequantizeTransposed's column alignment for `type`: its block's elements (at least four), 0 where kernels.wasm does not read it. */
export function transposeAlign(type: MatrixType): number {
  if (!WASM_TYPES.has(type)) return 0;
  return Math.max(FLOAT_ALIGN, typeInfo(plainTypeOf(type)).blockSize);
}

export class TransposeHost {
  private readonly outStage: Scratch;
  private readonly rowDecode: Scratch;
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.outStage = ctx.scratch();
    this.rowDecode = ctx.scratch();
  }

  dequantizeTransposed(out: Float32Array, w: WeightMatrix, rowFrom: number, rowCount: number, colFrom: number, colCount: number): void {
    this.ctx.checkOpen();
    const { rows, cols, type } = w;
    const align = transposeAlign(type);
    const whole = (value: number) => Number.isInteger(value) && value >= 0;
    if (align === 0 || cols % align !== 0) {
      throw new InferenceError("INTERNAL", `dequantizeTransposed: no kernel for a [${rows}, ${cols}] matrix of type ${type}`);
    }
    if (![rowFrom, rowCount, colFrom, colCount].every(whole) || rowCount < 1 || colCount < 1 || rowFrom + rowCount > rows || colFrom + colCount > cols) {
      throw new InferenceError("INTERNAL", `dequantizeTransposed: rows ${rowFrom} + ${rowCount}, columns ${colFrom} + ${colCount} are not inside [${rows}, ${cols}]`);
    }
    if (colFrom % align !== 0 || colCount % align !== 0) {
      throw new InferenceError("INTERNAL", `dequantizeTransposed: columns ${colFrom} + ${colCount} are not whole blocks of ${align}`);
    }
    const count = rowCount * colCount;
    if (out.length < count) throw new InferenceError("INTERNAL", `dequantizeTransposed: ${out.length} floats cannot hold [${colCount}, ${rowCount}]`);
    const weightBytes = storedRowBytes(type, cols) * rows;
    if (w.data.byteLength < weightBytes) throw new InferenceError("MODEL_FORMAT", `a [${rows}, ${cols}] weight needs ${weightBytes} bytes, has ${w.data.byteLength}`);
    const { arena, exports, pool } = this.ctx;
    const outAddress = arena.addressOf(out) ?? this.outStage.ensure(count * 4);
    const scratchStride = Math.ceil(exports.transposeScratchBytes(colCount) / 64) * 64;
    const scratch = this.rowDecode.ensure(scratchStride * pool.threads);
    const args = this.args.clear().add(type).add(this.ctx.residentAddress(w.data, weightBytes)).add(rows).add(cols);
    args.add(colFrom).add(colCount).add(outAddress).add(rowFrom).add(rowCount).add(scratch).add(scratchStride);
    // Threads by the panel's bytes written (and about as many read); never more than its tiles of four rows.
    pool.run(Op.DEQUANTIZE_TRANSPOSED, args, Math.min(Math.ceil(rowCount / 4), this.ctx.threadsFor(count * 4)));
    this.ctx.copyOut(out, outAddress, count);
  }
}
