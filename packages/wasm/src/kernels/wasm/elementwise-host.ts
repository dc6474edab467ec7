/**
 * The host half of the light steps between matmuls (assembly/elementwise.ts):
 * RMSNorm, RoPE and adds on buffers in the arena, on the calling thread, with
 * the same bits as ops.ts. Buffers that live elsewhere go to ops.ts itself:
 * staging them in and out would cost what the kernel saves.
 */
import { argmax, InferenceError } from "@infer/core";
import { addBias, addInPlace, applyRope, rmsNorm, rotationTable, type Activation } from "../ops.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";

export class ElementwiseHost {
  private readonly tableStage: Scratch;
  /** gatedBackward's staging: dGate, dUp, dOut, gate, up. */
  private readonly gatedStages: Scratch[];
  /** The rotation table staged last (ops.rotationTable keeps one per forward pass) and where. */
  private stagedTable: { cos: Float64Array; sin: Float64Array } | undefined;
  private stagedCos = 0;
  private stagedSin = 0;

  constructor(private readonly ctx: KernelContext) {
    this.tableStage = ctx.scratch();
    this.gatedStages = Array.from({ length: 5 }, () => ctx.scratch());
  }

  readonly rmsNorm: typeof rmsNorm = (out, x, weight, rows, dim, eps, unitOffset = 0) => {
    const arena = this.ctx.arena;
    const xAt = arena.addressOf(x);
    const outAt = arena.addressOf(out);
    if (xAt === undefined || outAt === undefined) {
      rmsNorm(out, x, weight, rows, dim, eps, unitOffset);
      return;
    }
    checkCount("rmsNorm", rows, dim);
    if (x.length < rows * dim || out.length < rows * dim || weight.length < dim) {
      throw new InferenceError("INTERNAL", `rmsNorm: buffers too small for [${rows}, ${dim}]`);
    }
    this.ctx.checkOpen();
    this.ctx.exports.rmsNorm(outAt, xAt, this.ctx.residentAddress(weight, dim * 4), rows, dim, eps, unitOffset);
  };

  readonly rope: typeof applyRope = (x, tokens, heads, headDim, positions, inverseFrequencies, mode, magnitude = 1) => {
    const xAt = this.ctx.arena.addressOf(x);
    if (xAt === undefined) {
      applyRope(x, tokens, heads, headDim, positions, inverseFrequencies, mode, magnitude);
      return;
    }
    checkCount("rope", tokens, heads);
    const pairs = inverseFrequencies.length;
    if (!Number.isInteger(headDim) || 2 * pairs > headDim || x.length < tokens * heads * headDim || positions.length < tokens) {
      throw new InferenceError("INTERNAL", `rope: ${pairs} pairs over [${tokens}, ${heads}, ${headDim}] do not fit the buffers`);
    }
    this.ctx.checkOpen();
    const table = rotationTable(tokens, positions, inverseFrequencies, magnitude);
    if (table !== this.stagedTable) {
      const bytes = table.cos.length * 8;
      this.stagedCos = this.tableStage.ensure(2 * bytes);
      this.stagedSin = this.stagedCos + bytes;
      const heap = this.ctx.arena.heap;
      heap.set(new Uint8Array(table.cos.buffer, table.cos.byteOffset, bytes), this.stagedCos);
      heap.set(new Uint8Array(table.sin.buffer, table.sin.byteOffset, bytes), this.stagedSin);
      this.stagedTable = table;
    }
    this.ctx.exports.rope(xAt, tokens, heads, headDim, this.stagedCos, this.stagedSin, pairs, mode === "neox" ? 1 : 0);
  };

  /**
   * Kernels.gatedBackward on the calling thread: the five buffers staged (the
   * exponentials in SIMD save far more than the copies cost), the two
   * gradients copied back.
   */
  readonly gatedBackward = (dGate: Float32Array, dUp: Float32Array, dOut: Float32Array, gate: Float32Array, up: Float32Array, count: number, activation: Activation): void => {
    checkCount("gatedBackward", count);
    if (dGate.length < count || dUp.length < count || dOut.length < count || gate.length < count || up.length < count) {
      throw new InferenceError("INTERNAL", `gatedBackward: buffers shorter than ${count}`);
    }
    if (activation !== "silu" && activation !== "gelu_tanh") throw new InferenceError("INTERNAL", `gatedBackward: unknown activation ${String(activation)}`);
    this.ctx.checkOpen();
    const [dGateAt, dUpAt, dOutAt, gateAt, upAt] = [dGate, dUp, dOut, gate, up].map((values, i) => this.ctx.floatsIn(values, count, this.gatedStages[i]!)) as [number, number, number, number, number];
    this.ctx.exports.gatedBackward(dGateAt, dUpAt, dOutAt, gateAt, upAt, count, activation === "silu" ? 0 : 1);
    this.ctx.copyOut(dGate, dGateAt, count);
    this.ctx.copyOut(dUp, dUpAt, count);
  };

  /** Kernels.gatedForward on the calling thread (assembly/activation.ts's gatedActivation over one row of `count`). */
  readonly gatedForward = (out: Float32Array, gate: Float32Array, up: Float32Array, count: number, activation: Activation): void => {
    checkCount("gatedForward", count);
    if (out.length < count || gate.length < count || up.length < count) throw new InferenceError("INTERNAL", `gatedForward: buffers shorter than ${count}`);
    if (activation !== "silu" && activation !== "gelu_tanh") throw new InferenceError("INTERNAL", `gatedForward: unknown activation ${String(activation)}`);
    this.ctx.checkOpen();
    const [outAt, gateAt, upAt] = [out, gate, up].map((values, i) => this.ctx.floatsIn(values, count, this.gatedStages[i]!)) as [number, number, number];
    this.ctx.exports.gatedActivation(outAt, gateAt, upAt, count, 1, 0, count, activation === "silu" ? 0 : 1, 0);
    this.ctx.copyOut(out, outAt, count);
  };

  /** @infer/core's argmax (the same index: the first of the largest, NaNs skipped) over logits in the arena. */
  readonly argmax = (values: Float32Array): number => {
    const at = this.ctx.arena.addressOf(values);
    if (at === undefined) return argmax(values);
    this.ctx.checkOpen();
    return this.ctx.exports.argmax(at, values.length);
  };

  readonly addInPlace: typeof addInPlace = (x, y, count = x.length) => {
    const arena = this.ctx.arena;
    const xAt = arena.addressOf(x);
    const yAt = arena.addressOf(y);
    if (xAt === undefined || yAt === undefined) {
      addInPlace(x, y, count);
      return;
    }
    checkCount("addInPlace", count);
    if (x.length < count || y.length < count) throw new InferenceError("INTERNAL", `addInPlace: buffers shorter than ${count}`);
    this.ctx.checkOpen();
    this.ctx.exports.addRepeated(xAt, yAt, count, count);
  };

  readonly addBias: typeof addBias = (x, bias, rows) => {
    const xAt = this.ctx.arena.addressOf(x);
    const dim = bias.length;
    if (xAt === undefined || dim === 0) {
      addBias(x, bias, rows);
      return;
    }
    checkCount("addBias", rows, dim);
    if (x.length < rows * dim) throw new InferenceError("INTERNAL", `addBias: buffer too small for [${rows}, ${dim}]`);
    this.ctx.checkOpen();
    this.ctx.exports.addRepeated(xAt, this.ctx.residentAddress(bias, dim * 4), rows * dim, dim);
  };
}

/** Counts the kernels index memory with: non-negative integers (a zero count does nothing). */
function checkCount(step: string, count: number, other = 0): void {
  const bad = !isCount(count) ? count : !isCount(other) ? other : undefined;
  if (bad !== undefined) throw new InferenceError("INTERNAL", `${step}: ${bad} is not a count`);
}

function isCount(value: number): boolean {
  return Number.isInteger(value) && value >= 0;
}
