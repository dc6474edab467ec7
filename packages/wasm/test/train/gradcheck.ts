// Finite-difference gradient checks: analytic gradients against central differences in float64.
import assert from "node:assert/strict";
import { after, before } from "node:test";
import type { Kernels } from "../../src/kernels/types.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";

/** ‖a − b‖ / max(‖a‖, ‖b‖): the gradient check's relative error. */
export function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let diff = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    diff += (a[i]! - b[i]!) ** 2;
    na += a[i]! ** 2;
    nb += b[i]! ** 2;
  }
  return Math.sqrt(diff) / Math.max(Math.sqrt(na), Math.sqrt(nb), 1e-30);
}

/**
 * ∂loss/∂x[i] by central differences for each i in `indices` (all by default):
 * x is perturbed in place by ±eps (and restored); for a float32 x the step
 * actually taken after rounding is used.
 */
export function finiteDifferences(x: Float32Array | Float64Array, loss: () => number, eps = 1e-5, indices?: number[]): Float64Array {
  const which = indices ?? Array.from(x, (_, i) => i);
  const out = new Float64Array(which.length);
  which.forEach((i, k) => {
    const saved = x[i]!;
    x[i] = saved + eps;
    const up = x[i]! - saved;
    const lossUp = loss();
    x[i] = saved - eps;
    const down = x[i]! - saved;
    const lossDown = loss();
    x[i] = saved;
    out[k] = (lossUp - lossDown) / (up - down);
  });
  return out;
}

export function assertGradient(name: string, analytic: ArrayLike<number>, numeric: ArrayLike<number>, bound = 1e-3): number {
  assert.equal(analytic.length, numeric.length, `${name}: lengths`);
  const error = relativeError(analytic, numeric);
  let norm = 0;
  for (let i = 0; i < analytic.length; i++) norm += analytic[i]! ** 2;
  assert.ok(norm > 0, `${name}: the analytic gradient is all zero, so the check would prove nothing`);
  assert.ok(error < bound, `${name}: relative error ${error.toExponential(2)} >= ${bound}`);
  return error;
}

/** Seeded values in [-scale, scale). */
export function randomValues(count: number, next: () => number, scale = 1, float64 = true): Float64Array | Float32Array {
  const out = float64 ? new Float64Array(count) : new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

/** Σ out[i] · weights[i]: a scalar whose gradient with respect to out is `weights`. */
export function dot(out: ArrayLike<number>, weights: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < out.length; i++) sum += out[i]! * weights[i]!;
  return sum;
}

/** The thread counts the SIMD kernels are compared at against the TypeScript reference. */
export const POOL_THREADS = [1, 2, 3, 4];

/**
 * Kernels with 1-4 threads, made before the calling file's tests and disposed
 * after them (registers the hooks): the array is filled in place, in POOL_THREADS order.
 */
export function kernelPools(): Kernels[] {
  const pools: Kernels[] = [];
  before(async () => {
    pools.push(...(await Promise.all(POOL_THREADS.map((threads) => createWasmKernels({ threads, minBytesPerThread: 0 })))));
  });
  after(async () => {
    await Promise.all(pools.map((k) => k.dispose?.()));
  });
  return pools;
}
