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

/**
 * Training's backward of the gated middle over `count` elements:
 * dGate += dOut * up * act'(gate), dUp += dOut * act(gate). SiLU four lanes at
 * a time: with s = sigmoid(g) (from e^-|g|, as silu4), act = g s and
 * act' = s (1 + g (1 - s)); the tail through the same lanes' arithmetic.
 * GELU-tanh in scalar Mathf.
 */
export function gatedBackward(dGate: usize, dUp: usize, dOut: usize, gate: usize, up: usize, count: i32, kind: i32): void {
  let i = 0;
  if (kind == SILU) {
    for (; i < count; i += 4) {
      const at = <usize>i << 2;
      // The last, partial vector: its lanes from a copy of the tail (the rest zero), stored lane by lane.
      const full = i + 4 <= count;
      const g = full ? v128.load(gate + at) : tailOf(gate + at, count - i);
      const e = exp4(f32x4.neg(f32x4.abs(g)));
      const one = f32x4.splat(1);
      const s = f32x4.div(v128.bitselect(e, one, f32x4.lt(g, f32x4.splat(0))), f32x4.add(e, one));
      const slope = f32x4.mul(s, f32x4.add(one, f32x4.mul(g, f32x4.sub(one, s))));
      const d = full ? v128.load(dOut + at) : tailOf(dOut + at, count - i);
      const u = full ? v128.load(up + at) : tailOf(up + at, count - i);
      const gradGate = f32x4.mul(f32x4.mul(d, u), slope);
      const gradUp = f32x4.mul(d, f32x4.mul(g, s));
      if (full) {
        v128.store(dGate + at, f32x4.add(v128.load(dGate + at), gradGate));
        v128.store(dUp + at, f32x4.add(v128.load(dUp + at), gradUp));
      } else {
        for (let k = 0; k < count - i; k++) {
          const o = at + (<usize>k << 2);
          store<f32>(dGate + o, load<f32>(dGate + o) + lane(gradGate, k));
          store<f32>(dUp + o, load<f32>(dUp + o) + lane(gradUp, k));
        }
      }
    }
    return;
  }
  for (; i < count; i++) {
    const at = <usize>i << 2;
    const g = load<f32>(gate + at);
    const t = Mathf.tanh(SQRT_2_OVER_PI * (g + 0.044715 * g * g * g));
    const slope = <f32>(0.5 * (1 + t) + 0.5 * g * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * g * g));
    const d = load<f32>(dOut + at);
    store<f32>(dGate + at, load<f32>(dGate + at) + d * load<f32>(up + at) * slope);
    store<f32>(dUp + at, load<f32>(dUp + at) + d * <f32>(0.5 * g * (1 + t)));
  }
}

/** The first `count` (1..3) floats at p in lanes 0.., the rest 0. */
function tailOf(p: usize, count: i32): v128 {
  let v = f32x4.splat(0);
  v = f32x4.replace_lane(v, 0, load<f32>(p));
  if (count > 1) v = f32x4.replace_lane(v, 1, load<f32>(p, 4));
  if (count > 2) v = f32x4.replace_lane(v, 2, load<f32>(p, 8));
  return v;
}

function lane(v: v128, k: i32): f32 {
  return k == 0 ? f32x4.extract_lane(v, 0) : k == 1 ? f32x4.extract_lane(v, 1) : f32x4.extract_lane(v, 2);
}
