/** The gated MLP's middle, out = act(gate) · up, and its backward (SiLU and tanh-GELU). */
import { silu, type Activation } from "../../kernels/ops.js";
import type { Kernels } from "../../kernels/types.js";

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const GELU_CUBIC = 0.044715;

function activate(x: number, activation: Activation): number {
  if (activation === "silu") return silu(x);
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)));
}

/** out = act(gate) · up: on the kernels' gatedForward where they have one (float32 buffers), else here in float64. */
export function gatedForward(out: Float32Array, gate: Float32Array, up: Float32Array, count: number, activation: Activation, kernels?: Kernels): void {
  if (kernels?.gatedForward && gate instanceof Float32Array) {
    kernels.gatedForward(out, gate, up, count, activation);
    return;
  }
  for (let i = 0; i < count; i++) out[i] = activate(gate[i]!, activation) * up[i]!;
}

/**
 * dGate += dOut · up · act'(gate); dUp += dOut · act(gate): on the kernels'
 * gatedBackward where they have one (float32 buffers), else the float64
 * reference here, where each element's activation and slope share one
 * exponential (or tanh).
 */
export function gatedBackward(
  dGate: Float32Array,
  dUp: Float32Array,
  dOut: Float32Array,
  gate: Float32Array,
  up: Float32Array,
  count: number,
  activation: Activation,
  kernels?: Kernels,
): void {
  if (kernels?.gatedBackward && gate instanceof Float32Array) {
    kernels.gatedBackward(dGate, dUp, dOut, gate, up, count, activation);
    return;
  }
  if (activation === "silu") {
    for (let i = 0; i < count; i++) {
      const g = gate[i]!;
      const s = 1 / (1 + Math.exp(-g));
      dGate[i] = dGate[i]! + dOut[i]! * up[i]! * s * (1 + g * (1 - s));
      dUp[i] = dUp[i]! + dOut[i]! * g * s;
    }
    return;
  }
  for (let i = 0; i < count; i++) {
    const g = gate[i]!;
    const t = Math.tanh(SQRT_2_OVER_PI * (g + GELU_CUBIC * g * g * g));
    const slope = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * GELU_CUBIC * g * g);
    dGate[i] = dGate[i]! + dOut[i]! * up[i]! * slope;
    dUp[i] = dUp[i]! + dOut[i]! * 0.5 * g * (1 + t);
  }
}
