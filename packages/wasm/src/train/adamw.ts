/** AdamW as PyTorch's torch.optim.AdamW (decoupled weight decay, bias-corrected moments). */

export interface AdamWSettings {
  learningRate: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

export const ADAMW_DEFAULTS: AdamWSettings = { learningRate: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0 };

/** One parameter tensor and its moments. */
export class AdamWState {
  private readonly m: Float64Array;
  private readonly v: Float64Array;

  constructor(
    readonly param: Float32Array,
    readonly grad: Float32Array,
  ) {
    this.m = new Float64Array(param.length);
    this.v = new Float64Array(param.length);
  }

  /** The first and second moments (PyTorch's exp_avg, exp_avg_sq). */
  moments(): [Float64Array, Float64Array] {
    return [this.m, this.v];
  }

  restoreMoments(m: Float64Array, v: Float64Array): void {
    this.m.set(m);
    this.v.set(v);
  }

  /** Step `step` (1-based) of the update with the current gradient. */
  update(step: number, s: AdamWSettings): void {
    const { param, grad, m, v } = this;
    const correction1 = 1 - s.beta1 ** step;
    const correction2 = 1 - s.beta2 ** step;
    const stepSize = s.learningRate / correction1;
    const decay = 1 - s.learningRate * s.weightDecay;
    // Settings read once into locals: the loop runs over every adapter parameter each step.
    const { beta1, beta2, eps } = s;
    for (let i = 0; i < param.length; i++) {
      const g = grad[i]!;
      const mi = beta1 * m[i]! + (1 - beta1) * g;
      const vi = beta2 * v[i]! + (1 - beta2) * g * g;
      m[i] = mi;
      v[i] = vi;
      param[i] = param[i]! * decay - (stepSize * mi) / (Math.sqrt(vi / correction2) + eps);
    }
  }
}
