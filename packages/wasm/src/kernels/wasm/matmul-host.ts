/**
 * The host half of matmul: validates shapes, keeps weights resident in the
 * arena, stages and quantizes activations once per call, and posts one job
 * whose rows (of one or several matrices sharing the input) the threads split.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, plainTypeOf, type WeightMatrix } from "../types.js";
import { rowBytes, typeName } from "../../formats/ggml-types.js";
import { referenceMatmul } from "../reference.js";
import { gatedActivation, type Activation } from "../ops.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { MAX_MATRICES, Op } from "./protocol.js";

/** Types kernels.wasm reads itself; others go through the reference kernel. */
const WASM_TYPES: ReadonlySet<GgmlType> = new Set([
  GgmlType.Q4_0_X4,
  GgmlType.Q8_0_X4,
  GgmlType.F32,
  GgmlType.F16,
  GgmlType.BF16,
  GgmlType.Q8_0,
  GgmlType.Q4_0,
  GgmlType.Q4_K,
  GgmlType.Q6_K,
]);
const FLOAT_TYPES: ReadonlySet<GgmlType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);
/** Activations are quantized in blocks of this many values (assembly/quantize.ts). */
const ACTIVATION_BLOCK = 32;

/** Bytes of a row of `cols` in `type`, the kernels' own layouts included (Q4_0_X4 moves Q4_0's bytes). */
function storedRowBytes(type: GgmlType, cols: number): number {
  return rowBytes(plainTypeOf(type), cols);
}

function storedTypeName(type: GgmlType): string {
  return plainTypeOf(type) !== type ? GgmlType[type]! : typeName(type);
}

/** Types prepareMatrix interleaves by four rows. */
const INTERLEAVED: ReadonlyMap<GgmlType, GgmlType> = new Map([
  [GgmlType.Q4_0, GgmlType.Q4_0_X4],
  [GgmlType.Q8_0, GgmlType.Q8_0_X4],
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
  private readonly gateStage: Scratch;
  private readonly upStage: Scratch;
  /** Reused for single-matrix calls, so matmul allocates nothing. */
  private readonly single = { outs: [] as Float32Array[], ws: [] as WeightMatrix[] };
  private readonly args: number[] = [];

  constructor(private readonly ctx: KernelContext) {
    this.xStage = ctx.scratch();
    this.outStage = ctx.scratch();
    this.xQuants = ctx.scratch();
    this.xScales = ctx.scratch();
    this.xSums = ctx.scratch();
    this.xQuantSums = ctx.scratch();
    this.rowDecode = ctx.scratch();
    this.gateStage = ctx.scratch();
    this.upStage = ctx.scratch();
  }

  matmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void {
    this.single.outs[0] = out;
    this.single.ws[0] = w;
    try {
      this.matmulMany(this.single.outs, this.single.ws, x, batch);
    } finally {
      // Drop the references, so the arrays are not kept alive by the kernels.
      this.single.ws.length = 0;
      this.single.outs.length = 0;
    }
  }

  matmulMany(outs: readonly Float32Array[], ws: readonly WeightMatrix[], x: Float32Array, batch: number): void {
    this.ctx.checkOpen();
    if (outs.length !== ws.length || ws.length === 0) {
      throw new InferenceError("INTERNAL", `matmulMany needs one output per matrix, got ${outs.length} for ${ws.length}`);
    }
    const cols = ws[0]!.cols;
    let native = 0; // matrices kernels.wasm reads, moved to the front
    const order: number[] = [];
    for (let i = 0; i < ws.length; i++) {
      const weightBytes = this.check(outs[i]!, ws[i]!, x, batch, cols);
      if (this.readsNatively(ws[i]!)) {
        order.splice(native++, 0, i);
        this.ctx.residentAddress(ws[i]!.data, weightBytes);
      } else {
        order.push(i);
      }
    }
    // Q4_1, Q5_0, Q5_1, Q5_K: rare in current models; the plain TypeScript kernel reads them.
    for (let k = native; k < order.length; k++) referenceMatmul(outs[order[k]!]!, ws[order[k]!]!, x, batch);
    for (let from = 0; from < native; from += MAX_MATRICES) {
      this.run(outs, ws, order.slice(from, Math.min(native, from + MAX_MATRICES)), x, batch, cols);
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
   * Kernels.prepareMatrix: Q4_0 and Q8_0 matrices of four rows or more
   * interleaved by four rows (assembly/interleave.ts), in place when they live
   * in the kernels' memory, else in a copy there; every other matrix as it is.
   */
  prepareMatrix(w: WeightMatrix): WeightMatrix {
    this.ctx.checkOpen();
    const layout = INTERLEAVED.get(w.type);
    const { rows, cols } = w;
    // Shapes that are not whole blocks of four rows or more are left for matmul to run (or to report).
    if (layout === undefined || !Number.isInteger(rows) || rows < 4 || !Number.isInteger(cols) || cols < ACTIVATION_BLOCK || cols % ACTIVATION_BLOCK !== 0) return w;
    const byteLength = rowBytes(w.type, cols) * rows;
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
    const scratchStride = Math.ceil((4 * rowBytes(w.type, cols)) / 64) * 64;
    const scratch = this.rowDecode.ensure(scratchStride * this.ctx.pool.threads);
    this.ctx.pool.run(Op.INTERLEAVE, [w.type, address, rows, cols, scratch, scratchStride], this.ctx.threadsFor(byteLength));
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
    const args = this.prepare(x, batch, cols, [gate, up], 2);
    const gateAddress = this.gateStage.ensure(count * 4);
    const upAddress = this.upStage.ensure(count * 4);
    args.push(gate.type, gateAddress, this.ctx.residentAddress(gate.data, gateBytes), rows);
    args.push(up.type, upAddress, this.ctx.residentAddress(up.data, upBytes), rows);
    const outAddress = this.ctx.arena.addressOf(out) ?? this.outStage.ensure(count * 4);
    args.push(outAddress, activation === "silu" ? 0 : 1);
    this.ctx.pool.run(Op.GATED, args, this.ctx.threadsFor((gateBytes + upBytes) * batch));
    this.ctx.copyOut(out, outAddress, count);
  }

  /** Stages x (and quantizes it when a matrix needs that); returns the job's shared arguments for `count` matrices. */
  private prepare(x: Float32Array, batch: number, cols: number, ws: readonly WeightMatrix[], count: number): number[] {
    const { exports, pool } = this.ctx;
    const elements = batch * cols;
    const xAddress = this.ctx.floatsIn(x, elements, this.xStage);
    let xq = 0;
    let xd = 0;
    let xs = 0;
    let xb = 0;
    if (ws.some((w) => !FLOAT_TYPES.has(w.type))) {
      const blocks = elements / ACTIVATION_BLOCK;
      xq = this.xQuants.ensure(elements * 2); // int16
      xd = this.xScales.ensure(blocks * 4);
      // The per-block sums only the types with a minimum (Q4_K) or an offset (Q4_0) read; 0: not written.
      if (ws.some((w) => w.type === GgmlType.Q4_K)) xs = this.xSums.ensure(blocks * 4);
      if (ws.some((w) => w.type === GgmlType.Q4_0 || w.type === GgmlType.Q4_0_X4)) xb = this.xQuantSums.ensure(blocks * 4);
      exports.quantizeActivations(xAddress, batch, cols, xq, xd, xs, xb);
    }
    // With batch > 1 each thread decodes a row at a time into its own slice of this scratch.
    const scratchStride = batch > 1 ? Math.ceil(exports.decodeScratchBytes(cols) / 64) * 64 : 0;
    const scratch = batch > 1 ? this.rowDecode.ensure(scratchStride * pool.threads) : 0;
    const args = this.args;
    args.length = 0;
    args.push(cols, xAddress, xq, xd, xs, xb, batch, scratch, scratchStride, count);
    return args;
  }

  private run(outs: readonly Float32Array[], ws: readonly WeightMatrix[], picked: number[], x: Float32Array, batch: number, cols: number): void {
    const arena = this.ctx.arena;
    const args = this.prepare(
      x,
      batch,
      cols,
      picked.map((i) => ws[i]!),
      picked.length,
    );
    // Outputs not already in the arena get consecutive slices of one staging buffer.
    let staged = 0;
    for (const i of picked) if (arena.addressOf(outs[i]!) === undefined) staged += batch * ws[i]!.rows;
    let next = staged > 0 ? this.outStage.ensure(staged * 4) : 0;
    let bytes = 0;
    for (const i of picked) {
      const w = ws[i]!;
      const weightBytes = storedRowBytes(w.type, cols) * w.rows;
      bytes += weightBytes * batch;
      let outAddress = arena.addressOf(outs[i]!);
      if (outAddress === undefined) {
        outAddress = next;
        next += batch * w.rows * 4;
      }
      args.push(w.type, outAddress, this.ctx.residentAddress(w.data, weightBytes), w.rows);
    }
    this.ctx.pool.run(Op.MATMUL, args, this.ctx.threadsFor(bytes));
    for (let k = 0; k < picked.length; k++) {
      const i = picked[k]!;
      this.ctx.copyOut(outs[i]!, args[11 + 4 * k]! >>> 0, batch * ws[i]!.rows);
    }
  }
}
