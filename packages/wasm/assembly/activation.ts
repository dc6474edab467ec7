// The gated MLP's middle, out = act(gate) * up, for rows [rowStart, rowEnd)
// of [batch, rows] buffers out and gate, in f32, after the same thread computed
// those rows of gate and up (GATED in src/kernels/wasm/protocol.ts). up is that
// thread's tile: row rowStart of activation row 0 at up, activation row b's
// values upStride floats after row b - 1's. SiLU runs four lanes at a time on
// exp4; GELU-tanh in scalar Mathf.

import { exp4 } from "./exp";

export const SILU = 0;
export const GELU_TANH = 1;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

export function gatedActivation(out: usize, gate: usize, up: usize, rows: i32, batch: i32, rowStart: i32, rowEnd: i32, kind: i32, upStride: i32): void {
  for (let b = 0; b < batch; b++) {
    const base = (<usize>b * <usize>rows) << 2;
    const upRow = up + ((<usize>b * <usize>upStride - <usize>rowStart) << 2); // + r * 4: up's row r
    let r = rowStart;
    if (kind == SILU) {
      for (; r + 4 <= rowEnd; r += 4) {
        const at = base + (<usize>r << 2);
        v128.store(out + at, f32x4.mul(silu4(v128.load(gate + at)), v128.load(upRow + (<usize>r << 2))));
      }
    }
    for (; r < rowEnd; r++) {
      const at = base + (<usize>r << 2);
      const g = load<f32>(gate + at);
      // The tail through the same lanes' arithmetic: a row's value must not depend on where a thread's share ends.
      const activated = kind == SILU ? f32x4.extract_lane(silu4(f32x4.splat(g)), 0) : 0.5 * g * (1 + Mathf.tanh(SQRT_2_OVER_PI * (g + 0.044715 * g * g * g)));
      store<f32>(out + at, activated * load<f32>(upRow + (<usize>r << 2)));
    }
  }
}

/**
 * g / (1 + e^-g) per lane, from e = e^-|g| <= 1 (exp4's domain, no overflow):
 * g / (1 + e) where g >= 0, g * e / (1 + e) where g < 0.
 */
function silu4(g: v128): v128 {
  const e = exp4(f32x4.neg(f32x4.abs(g)));
  const numerator = v128.bitselect(f32x4.mul(g, e), g, f32x4.lt(g, f32x4.splat(0)));
  return f32x4.div(numerator, f32x4.add(e, f32x4.splat(1)));
}
