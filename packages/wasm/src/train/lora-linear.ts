/**
 * One LoRA adapter on a frozen linear, as PEFT's lora.Linear: out += scale ·
 * B · A · dropout(x), A [rank, in] Kaiming-uniform (PEFT's
 * kaiming_uniform_(a = √5): bounds ±1/√in), B [out, rank] zero, scale = alpha / rank.
 */
import type { Rng } from "@infer/core";
import type { Kernels } from "../kernels/types.js";
import { denseBackward, denseForward } from "./ops/linear.js";
import { like } from "./ops/buffers.js";

/** What the training forward keeps for the backward. */
interface Tape {
  /** The input after dropout, [n, in]. */
  x: Float32Array;
  /** Dropout's kept-and-scaled factor per input element, [n, in]; absent without dropout. */
  mask?: Float32Array;
  /** scale · A · x, [n, rank]: scaled here, [n, rank], so that no [n, out] product is scaled. */
  u: Float32Array;
}

export class LoraLinear {
  /** [rank, inFeatures] */
  readonly a: Float32Array;
  /** [outFeatures, rank] */
  readonly b: Float32Array;
  readonly gradA: Float32Array;
  readonly gradB: Float32Array;
  private tape: Tape | undefined;

  constructor(
    /** Where the adapter sits, as PEFT names it: block index and module ("q_proj"). */
    readonly layer: number,
    readonly module: string,
    readonly inFeatures: number,
    readonly outFeatures: number,
    readonly rank: number,
    readonly scale: number,
    rng: Rng,
  ) {
    this.a = new Float32Array(rank * inFeatures);
    const bound = 1 / Math.sqrt(inFeatures);
    for (let i = 0; i < this.a.length; i++) this.a[i] = (2 * rng.nextFloat() - 1) * bound;
    this.b = new Float32Array(outFeatures * rank);
    this.gradA = new Float32Array(this.a.length);
    this.gradB = new Float32Array(this.b.length);
  }

  /**
   * out [tokens, out] += scale · B · A · dropout(x) (rate `dropout`, drawn from
   * rng), keeping what backward needs; its matmuls on `kernels` where they have matmulDense.
   */
  forward(out: Float32Array, x: Float32Array, tokens: number, dropout: number, rng: Rng, kernels?: Kernels): void {
    let input = x;
    let mask: Float32Array | undefined;
    if (dropout > 0) {
      mask = like(x, tokens * this.inFeatures);
      input = like(x, mask.length);
      const keep = 1 / (1 - dropout);
      for (let i = 0; i < mask.length; i++) {
        mask[i] = rng.nextFloat() < dropout ? 0 : keep;
        input[i] = x[i]! * mask[i]!;
      }
    }
    const u = like(x, tokens * this.rank);
    denseForward(u, this.a, this.rank, this.inFeatures, input, tokens, kernels);
    for (let i = 0; i < u.length; i++) u[i] = u[i]! * this.scale;
    this.addUp(out, u, tokens, kernels);
    this.tape = { x: input, mask, u };
  }

  /** Adds this adapter's gradients for dy [tokens, out] to gradA and gradB, and its input's to dx [tokens, in]. */
  backward(dx: Float32Array, dy: Float32Array, tokens: number, kernels?: Kernels): void {
    const tape = this.tape;
    if (!tape) throw new Error("LoraLinear.backward without a forward");
    this.tape = undefined;
    // With u kept as scale · A x: gradB += dyᵀ · u, and d(A x) = scale · dy · B, scaled at [tokens, rank]
    // rather than dy at [tokens, out] (a copy of dy per adapter cost more than the adapter's products).
    const du = like(dy, tokens * this.rank);
    denseBackward(this.gradB, du, this.b, this.outFeatures, this.rank, tape.u, dy, tokens, kernels);
    for (let i = 0; i < du.length; i++) du[i] = du[i]! * this.scale;
    const dInput = tape.mask ? like(dy, tokens * this.inFeatures) : dx;
    denseBackward(this.gradA, dInput, this.a, this.rank, this.inFeatures, tape.x, du, tokens, kernels);
    if (tape.mask) for (let i = 0; i < dInput.length; i++) dx[i] = dx[i]! + dInput[i]! * tape.mask[i]!;
  }

  /** The arrays the last forward kept for the backward. */
  keptArrays(): Float32Array[] {
    const tape = this.tape;
    return tape ? [tape.x, tape.u, ...(tape.mask ? [tape.mask] : [])] : [];
  }

  /** Drops what the last forward kept (its block is recomputed before the backward). */
  discardTape(): void {
    this.tape = undefined;
  }

  get parameterCount(): number {
    return this.a.length + this.b.length;
  }

  /** out += B · u, u already scaled. */
  private addUp(out: Float32Array, u: Float32Array, tokens: number, kernels?: Kernels): void {
    const delta = like(u, tokens * this.outFeatures);
    denseForward(delta, this.b, this.outFeatures, this.rank, u, tokens, kernels);
    for (let i = 0; i < delta.length; i++) out[i] = out[i]! + delta[i]!;
  }
}
