/**
 * RoPE's backward. The forward (kernels/ops.ts applyRope) rotates each pair by
 * +angle and scales by the magnitude; the rotation's transpose is the same
 * rotation by −angle, so the backward is applyRope with negated frequencies.
 */
import { applyRope, type RopeMode } from "../../kernels/ops.js";

/** Negated copies by frequency table: ops.ts caches its cos/sin table by the array's identity. */
const negatedTables = new WeakMap<Float64Array, Float64Array>();

function negated(inverseFrequencies: Float64Array): Float64Array {
  let table = negatedTables.get(inverseFrequencies);
  if (!table) {
    table = inverseFrequencies.map((f) => -f);
    negatedTables.set(inverseFrequencies, table);
  }
  return table;
}

/** Turns dy [tokens, heads, headDim] (the gradient of RoPE's output) into the gradient of its input, in place. */
export function ropeBackward(
  dy: Float32Array,
  tokens: number,
  heads: number,
  headDim: number,
  positions: Int32Array,
  inverseFrequencies: Float64Array,
  mode: RopeMode,
  magnitude = 1,
): void {
  applyRope(dy, tokens, heads, headDim, positions, negated(inverseFrequencies), mode, magnitude);
}
