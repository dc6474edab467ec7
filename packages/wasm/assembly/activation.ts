// The gated MLP's middle, out = act(gate) * up, for rows [rowStart, rowEnd)
// of [batch, rows] buffers, in f32 (Mathf), after the same thread computed
// those rows of gate and up (see matmulGated in index.ts).

export const SILU = 0;
export const GELU_TANH = 1;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

export function gatedActivation(out: usize, gate: usize, up: usize, rows: i32, batch: i32, rowStart: i32, rowEnd: i32, kind: i32): void {
  for (let b = 0; b < batch; b++) {
    const base = (<usize>b * <usize>rows) << 2;
    for (let r = rowStart; r < rowEnd; r++) {
      const at = base + (<usize>r << 2);
      const g = load<f32>(gate + at);
      const activated =
        kind == SILU ? g / (1 + Mathf.exp(-g)) : 0.5 * g * (1 + Mathf.tanh(SQRT_2_OVER_PI * (g + 0.044715 * g * g * g)));
      store<f32>(out + at, activated * load<f32>(up + at));
    }
  }
}
