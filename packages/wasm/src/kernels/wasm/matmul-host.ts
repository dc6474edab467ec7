/**
 * The host half of matmul: validates shapes, keeps weights resident in the
 * arena, stages and quantizes activations once per call, and posts one job
 * whose rows (of one or several matrices sharing the input) the threads split.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, rowBytes, typeName } from "@infer/formats";
import { KernelLayout, plainTypeOf, type MatrixType, type WeightMatrix } from "../types.js";
import { referenceMatmul } from "../reference.js";
import { gatedActivation, type Activation } from "../ops.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { gatedTileRows, JobArgs, MAX_MATRICES, Op } from "./protocol.js";

/** Types kernels.wasm reads itself; others go through the reference kernel. */
export const WASM_TYPES: ReadonlySet<MatrixType> = new Set([
  KernelLayout.Q4_0_X4,
  KernelLayout.Q8_0_X4,
  KernelLayout.Q5_0_X4,
  KernelLayout.Q5_1_X4,
  GgmlType.F32,
  GgmlType.F16,
  GgmlType.BF16,
  GgmlType.Q8_0,
  GgmlType.Q4_0,
  GgmlType.Q4_1,
  GgmlType.Q5_0,
  GgmlType.Q5_1,
  GgmlType.Q4_K,
  GgmlType.Q5_K,
  GgmlType.Q6_K,
]);
const FLOAT_TYPES: ReadonlySet<MatrixType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);
/** Activations are quantized in blocks of this many values (assembly/quantize.ts). */
const ACTIVATION_BLOCK = 32;

/** Bytes of a row of `cols` in `type`, the kernels' own layouts included (Q4_0_X4 moves Q4_0's bytes). */
export function storedRowBytes(type: MatrixType, cols: number): number {
  return rowBytes(plainTypeOf(type), cols);
}

function storedTypeName(type: MatrixType): string {
  return plainTypeOf(type) !== type ? KernelLayout[type]! : typeName(type);
}

/** What of the quantized activations (assembly/quantize.ts) a matrix type reads, as bits. */
const Needs = {
  /** The int16 quants and the blocks' scales: every quantized type. */
  QUANTS: 1,
  /** The blocks' sums, for the minimums of Q4_K and Q5_K. */
  SUMS: 2,
  /** The blocks' quant sums, for Q4_0's -8 offset, Q5_0_X4's -16 and the minimums of Q4_1 and Q5_1 (and Q5_1_X4). */
  QUANT_SUMS: 4,
} as const;

function activationNeeds(type: MatrixType): number {
  if (FLOAT_TYPES.has(type)) return 0;
  if (type === GgmlType.Q4_K || type === GgmlType.Q5_K) return Needs.QUANTS | Needs.SUMS;
  if (type === GgmlType.Q4_0 || type === KernelLayout.Q4_0_X4 || type === GgmlType.Q4_1 || type === GgmlType.Q5_1 || type === KernelLayout.Q5_0_X4 || type === KernelLayout.Q5_1_X4) {
    return Needs.QUANTS | Needs.QUANT_SUMS;
  }
  return Needs.QUANTS;
}

/** Types prepareMatrix interleaves by four rows. */
const INTERLEAVED: ReadonlyMap<MatrixType, KernelLayout> = new Map([
  [GgmlType.Q4_0, KernelLayout.Q4_0_X4],
  [GgmlType.Q8_0, KernelLayout.Q8_0_X4],
  [GgmlType.Q5_0, KernelLayout.Q5_0_X4],
  [GgmlType.Q5_1, KernelLayout.Q5_1_X4],
]);

export class MatmulHost {
  /** prepareMatrix's results by the bytes they came from. */
  private readonly prepared = new WeakMap<Uint8Array, WeightMatrix>();
  private readonly xStage: Scratch;
  private readonly outStage: Scratch;
  private readonly xQuants: Scratch;
  private readonly xScales: Scratch;
  private readonly xSums: Scratch;
  private readonly xQuantSums: Scratch;
  private readonly rowDecode: Scratch;
  private readonly upStage: Scratch;
  private readonly denseStage: Scratch;
  /** Reused for single-matrix calls, so matmul allocates nothing (they keep the last call's two references). */
  private readonly single = { outs: [] as Float32Array[], ws: [] as WeightMatrix[] };
  private readonly args = new JobArgs();
  /** Bytes between two threads' sinks on a batch-1 call (prepare), asked of the module once. */
  private readonly sinkStride: number;

  constructor(private readonly ctx: KernelContext) {
    this.sinkStride = Math.ceil(ctx.exports.decodeSinkBytes() / 128) * 128 + 128;
    this.xStage = ctx.scratch();
    this.outStage = ctx.scratch();
    this.xQuants = ctx.scratch();
    this.xScales = ctx.scratch();
    this.xSums = ctx.scratch();
    this.xQuantSums = ctx.scratch();
    this.rowDecode = ctx.scratch();
    this.upStage = ctx.scratch();
    this.denseStage = ctx.scratch();
  }

  matmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void {
    this.single.outs[0] = out;
    this.single.ws[0] = w;
    this.matmulMany(this.single.outs, this.single.ws, x, batch);
  }

  /**
   * Kernels.matmulDense: w copied into staging memory on every call and read
   * there in place (a weight living outside the arena would be copied once and
   * kept, so later values would not be seen).
   */
  matmulDense(out: Float32Array, w: Float32Array, rows: number, cols: number, x: Float32Array, batch: number): void {
    this.ctx.checkOpen();
    if (w.length < rows * cols) throw new InferenceError("INTERNAL", `matmulDense: ${w.length} floats cannot be a [${rows}, ${cols}] matrix`);
    const address = this.ctx.floatsIn(w, rows * cols, this.denseStage);
    this.matmul(out, { type: GgmlType.F32, rows, cols, data: this.ctx.arena.view(address, rows * cols * 4) }, x, batch);
  }

  matmulMany(outs: readonly Float32Array[], ws: readonly WeightMatrix[], x: Float32Array, batch: number): void {
    this.ctx.checkOpen();
    if (outs.length !== ws.length || ws.length === 0) {
      throw new InferenceError("INTERNAL", `matmulMany needs one output per matrix, got ${outs.length} for ${ws.length}`);
    }
    const cols = ws[0]!.cols;
    let allNative = true;
    for (let i = 0; i < ws.length; i++) {
      const weightBytes = this.check(outs[i]!, ws[i]!, x, batch, cols);
      if (this.readsNatively(ws[i]!)) this.ctx.residentAddress(ws[i]!.data, weightBytes);
      else allNative = false;
    }
    if (allNative && ws.length <= MAX_MATRICES) {
      this.run(outs, ws, x, batch, cols);
      return;
    }
    // Any type kernels.wasm does not read goes to the plain TypeScript kernel, which reads every
    // type with a dequantizer (all of them do read natively today; Q2_K and Q3_K it rejects).
    const picked = ws.map((w, i) => i).filter((i) => this.readsNatively(ws[i]!));
    for (let i = 0; i < ws.length; i++) if (!this.readsNatively(ws[i]!)) referenceMatmul(outs[i]!, ws[i]!, x, batch);
    for (let from = 0; from < picked.length; from += MAX_MATRICES) {
      const some = picked.slice(from, from + MAX_MATRICES);
      this.run(
        some.map((i) => outs[i]!),
        some.map((i) => ws[i]!),
        x,
        batch,
        cols,
      );
    }
  }

  /** Validates one matrix against the call; returns its byte length. */
  private check(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number, cols: number): number {
    const { rows } = w;
    if (!Number.isInteger(batch) || batch < 1 || !Number.isInteger(rows) || rows < 1 || !Number.isInteger(w.cols) || w.cols < 1) {
      throw new InferenceError("INTERNAL", `matmul shape [${batch}, ${w.cols}] x [${rows}, ${w.cols}]ᵀ is not positive integers`);
    }
    if (w.cols !== cols) throw new InferenceError("INTERNAL", `matmulMany: matrices of ${cols} and ${w.cols} columns share one input`);
    if (x.length < batch * cols || out.length < batch * rows) {
      throw new InferenceError("INTERNAL", `matmul buffers too small for [${batch}, ${cols}] x [${rows}, ${cols}]ᵀ`);
    }
    const weightBytes = storedRowBytes(w.type, cols) * rows; // throws for unknown types and partial blocks
    if (w.data.byteLength < weightBytes) {
      throw new InferenceError("MODEL_FORMAT", `${storedTypeName(w.type)} weight [${rows}, ${cols}] needs ${weightBytes} bytes, has ${w.data.byteLength}`);
    }
    return weightBytes;
  }

  /**
   * Kernels.prepareMatrix: Q4_0, Q8_0, Q5_0 and Q5_1 matrices of four rows or more
   * interleaved by four rows (assembly/interleave.ts), in place when they live
   * in the kernels' memory, else in a copy there; every other matrix as it is.
   */
  prepareMatrix(w: WeightMatrix): WeightMatrix {
    this.ctx.checkOpen();
    const layout = INTERLEAVED.get(w.type);
    const { rows, cols } = w;
    // Shapes that are not whole blocks of four rows or more are left for matmul to run (or to report).
    if (layout === undefined || !Number.isInteger(rows) || rows < 4 || !Number.isInteger(cols) || cols < ACTIVATION_BLOCK || cols % ACTIVATION_BLOCK !== 0) return w;
    const byteLength = storedRowBytes(w.type, cols) * rows;
    if (w.data.byteLength < byteLength) return w;
    // The same bytes twice would be interleaved twice: the second call gets the first's matrix.
    const done = this.prepared.get(w.data);
    if (done) return done;
    const arena = this.ctx.arena;
    let data = w.data;
    let address = arena.addressOf(data);
    if (address === undefined) {
      address = arena.allocate(byteLength);
      arena.heap.set(w.data.subarray(0, byteLength), address);
      data = arena.view(address, byteLength);
      this.ctx.releaseWhenCollected.register(data, address);
    }
    // The groups split across the threads: at load, the pass over the weights is what it costs.
    const scratchStride = Math.ceil((4 * storedRowBytes(w.type, cols)) / 64) * 64;
    const scratch = this.rowDecode.ensure(scratchStride * this.ctx.pool.threads);
    const args = this.args.clear().add(w.type).add(address).add(rows).add(cols).add(scratch).add(scratchStride);
    this.ctx.pool.run(Op.INTERLEAVE, args, this.ctx.threadsFor(byteLength));
    const matrix: WeightMatrix = { type: layout, rows, cols, data };
    this.prepared.set(w.data, matrix);
    return matrix;
  }

  private readsNatively(w: WeightMatrix): boolean {
    return WASM_TYPES.has(w.type) && (FLOAT_TYPES.has(w.type) || w.cols % ACTIVATION_BLOCK === 0);
  }

  /**
   * out = act(gate · x) * (up · x), the gated MLP's middle, in one job: each
   * thread computes its rows of both products and applies the activation.
   */
  matmulGated(out: Float32Array, gate: WeightMatrix, up: WeightMatrix, x: Float32Array, batch: number, activation: Activation): void {
    this.ctx.checkOpen();
    const cols = gate.cols;
    const gateBytes = this.check(out, gate, x, batch, cols);
    const upBytes = this.check(out, up, x, batch, cols);
    if (gate.rows !== up.rows) throw new InferenceError("INTERNAL", `matmulGated: gate has ${gate.rows} rows, up ${up.rows}`);
    if (activation !== "silu" && activation !== "gelu_tanh") throw new InferenceError("INTERNAL", `matmulGated: unknown activation ${String(activation)}`);
    const rows = gate.rows;
    const count = batch * rows;
    if (!this.readsNatively(gate) || !this.readsNatively(up)) {
      const gateOut = new Float32Array(count);
      const upOut = new Float32Array(count);
      this.matmulMany([gateOut, upOut], [gate, up], x, batch);
      gatedActivation(out, gateOut, upOut, count, activation);
      return;
    }
    const args = this.prepare(x, batch, cols, activationNeeds(gate.type) | activationNeeds(up.type), 2);
    const outAddress = this.ctx.arena.addressOf(out) ?? this.outStage.ensure(count * 4);
    // The gate's products go straight to out, which the activation then rewrites in place (it
    // reads each element before storing it); the up products to a tile per thread (gatedRows).
    const tileBytes = Math.ceil((batch * gatedTileRows(batch) * 4) / 64) * 64;
    const upTiles = this.upStage.ensure(tileBytes * this.ctx.pool.threads);
    args.add(gate.type).add(outAddress).add(this.ctx.residentAddress(gate.data, gateBytes)).add(rows);
    args.add(up.type).add(upTiles).add(this.ctx.residentAddress(up.data, upBytes)).add(rows);
    args.add(outAddress).add(activation === "silu" ? 0 : 1).add(tileBytes);
    this.ctx.pool.run(Op.GATED, args, this.ctx.threadsFor((gateBytes + upBytes) * batch));
    this.ctx.copyOut(out, outAddress, count);
  }

  /**
   * Stages x and quantizes it as `needs` (activationNeeds of the job's
   * matrices, or-ed) asks; returns the job's shared arguments for `count` matrices.
   */
  private prepare(x: Float32Array, batch: number, cols: number, needs: number, count: number): JobArgs {
    const { exports, pool } = this.ctx;
    const elements = batch * cols;
    const xAddress = this.ctx.floatsIn(x, elements, this.xStage);
    let xq = 0;
    let xd = 0;
    let xs = 0;
    let xb = 0;
    if (needs & Needs.QUANTS) {
      const blocks = elements / ACTIVATION_BLOCK;
      // int16 quants and f32 scales, with batch > 1 followed by their copy for the prefill tile.
      xq = this.xQuants.ensure(exports.activationQuantBytes(batch, cols));
      xd = this.xScales.ensure(exports.activationScaleBytes(batch, cols));
      // The per-block sums only the types that read them get; 0: not written.
      if (needs & Needs.SUMS) xs = this.xSums.ensure(blocks * 4);
      if (needs & Needs.QUANT_SUMS) xb = this.xQuantSums.ensure(blocks * 4);
      exports.quantizeActivations(xAddress, batch, cols, xq, xd, xs, xb);
    }
    // With batch > 1 each thread decodes a row at a time into its own slice of this scratch; with
    // batch 1 the row loops store to theirs (decodeSinkBytes) and read nothing else of it, so the
    // slices get 128 spare bytes: no two threads write to one cache line or its prefetched neighbour.
    const scratchStride = batch > 1 ? Math.ceil(exports.decodeScratchBytes(cols) / 64) * 64 : this.sinkStride;
    const scratch = this.rowDecode.ensure(scratchStride * pool.threads);
    return this.args.clear().add(cols).add(xAddress).add(xq).add(xd).add(xs).add(xb).add(batch).add(scratch).add(scratchStride).add(count);
  }

  /** One MATMUL job for up to MAX_MATRICES matrices that kernels.wasm reads, sharing the input x. */
  private run(outs: readonly Float32Array[], ws: readonly WeightMatrix[], x: Float32Array, batch: number, cols: number): void {
    const arena = this.ctx.arena;
    let needs = 0;
    for (const w of ws) needs |= activationNeeds(w.type);
    const args = this.prepare(x, batch, cols, needs, ws.length);
    // Outputs not already in the arena get consecutive slices of one staging buffer.
    let staged = 0;
    for (let i = 0; i < ws.length; i++) if (arena.addressOf(outs[i]!) === undefined) staged += batch * ws[i]!.rows;
    let next = staged > 0 ? this.outStage.ensure(staged * 4) : 0;
    let bytes = 0;
    for (let i = 0; i < ws.length; i++) {
      const w = ws[i]!;
      const weightBytes = storedRowBytes(w.type, cols) * w.rows;
      bytes += weightBytes * batch;
      let outAddress = arena.addressOf(outs[i]!);
      if (outAddress === undefined) {
        outAddress = next;
        next += batch * w.rows * 4;
      }
      args.add(w.type).add(outAddress).add(this.ctx.residentAddress(w.data, weightBytes)).add(w.rows);
    }
    this.ctx.pool.run(Op.MATMUL, args, this.ctx.threadsFor(bytes));
    for (let i = 0; i < ws.length; i++) this.ctx.copyOut(outs[i]!, args.values[11 + 4 * i]! >>> 0, batch * ws[i]!.rows);
  }
}
