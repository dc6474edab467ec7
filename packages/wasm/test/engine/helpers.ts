/** Shared bits of the engine tests: the real-model folder, seeded randoms, naive math. */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { seededRandom } from "@infer/core/testing";

/** /work/shared/models beside the repository (dist/test/engine/*.js is six levels below its parent). */
export const SHARED_MODELS = fileURLToPath(new URL("../../../../../../shared/models/", import.meta.url));

/** A node:test `skip` value: false when the real models are present, else the reason. */
export function skipWithoutSharedModels(): string | false {
  return existsSync(SHARED_MODELS) ? false : `real test models not found at ${SHARED_MODELS} (only present in the workplace)`;
}

/** Seeded uniform randoms in [-scale, scale). */
export function randomArray(seed: number, count: number, scale = 1): Float32Array {
  const next = seededRandom(seed);
  return Float32Array.from({ length: count }, () => (2 * next() - 1) * scale);
}

export function argmax(values: Float32Array, offset = 0, length = values.length - offset): number {
  let best = 0;
  for (let i = 1; i < length; i++) if (values[offset + i]! > values[offset + best]!) best = i;
  return best;
}

/** Largest |a - b| / (1 + |b|) over the arrays, which must have equal lengths. */
export function maxRelativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} != ${expected.length}`);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!) / (1 + Math.abs(expected[i]!)));
  }
  return worst;
}
