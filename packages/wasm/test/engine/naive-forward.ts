/**
 * A deliberately plain float64 forward pass written from the Hugging Face
 * modelling code of each architecture: whole sequence recomputed, no cache,
 * no batching, weights read straight from the random generator's HF-layout
 * tensors. It checks the engine's plumbing (cache, batching, tensor naming,
 * GGUF conversions) rather than the formulas, which kernels.test.ts checks.
 */
import { ropeInverseFrequencies, type RopeScaling } from "../../src/engine/rope.js";
import { longRopeParameters, randomTensors, type RandomModelDims } from "../../src/testing/random-models.js";

type Vector = Float64Array;

/** `contextLength`: the context the run is set up for (LongRoPE picks its factors by it). */
export function naiveLogits(dims: RandomModelDims, tokens: number[], contextLength = dims.contextLength): Float64Array[] {
  const weights = new Map(randomTensors(dims).map((t) => [t.name, t]));
  const get = (name: string) => {
    const tensor = weights.get(name);
    if (!tensor) throw new Error(`no tensor ${name}`);
    return tensor;
  };
  const arch = dims.architecture;
  const gemma = arch === "gemma3";
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, ffnSize, rmsEps } = dims;

  const matvec = (name: string, x: Vector): Vector => {
    const { shape, data } = get(name);
    const [rows, cols] = shape as [number, number];
    const out = new Float64Array(rows);
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let c = 0; c < cols; c++) sum += data[r * cols + c]! * x[c]!;
      out[r] = sum;
    }
    if (weights.has(name.replace(/weight$/, "bias"))) {
      const bias = get(name.replace(/weight$/, "bias")).data;
      out.forEach((v, i) => (out[i] = v + bias[i]!));
    }
    return out;
  };
  const rms = (x: Vector, name: string): Vector => {
    const w = get(name).data;
    const mean = x.reduce((s, v) => s + v * v, 0) / x.length;
    return x.map((v, i) => (v / Math.sqrt(mean + rmsEps)) * ((gemma ? 1 : 0) + w[i]!));
  };
  const act = (v: number) =>
    gemma ? 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))) : v / (1 + Math.exp(-v));

  const scaling: RopeScaling = dims.llama3RopeScaling ? { type: "llama3", ...dims.llama3RopeScaling } : { type: "none" };
  let globalFrequencies = ropeInverseFrequencies(headDim, dims.ropeTheta, scaling);
  let ropeMagnitude = 1;
  if (dims.longRope) {
    // HF _compute_longrope_parameters: inv_freq = 1 / (ext_factors * base^(2i/d)); cos and sin times attention_factor.
    const { short, long, attentionFactor } = longRopeParameters(dims);
    const factors = contextLength > dims.longRope.originalContextLength ? long : short;
    globalFrequencies = Float64Array.from(factors, (f, i) => 1 / (f * Math.pow(dims.ropeTheta, (2 * i) / headDim)));
    ropeMagnitude = attentionFactor;
  }
  const localFrequencies = ropeInverseFrequencies(headDim, 10000, { type: "none" });
  const isLocal = (layer: number) => (gemma ? (layer + 1) % 6 !== 0 : arch === "phi3");
  /** HF rotate_half on one head. */
  const rope = (head: Vector, position: number, frequencies: Float64Array): Vector => {
    const half = headDim / 2;
    return head.map((v, j) => {
      const angle = position * frequencies[j % half]!;
      const rotated = j < half ? -head[j + half]! : head[j - half]!;
      return (v * Math.cos(angle) + rotated * Math.sin(angle)) * ropeMagnitude;
    });
  };

  const n = tokens.length;
  const embedding = get("token_embd.weight").data;
  let xs: Vector[] = tokens.map((t) =>
    Float64Array.from(embedding.subarray(t * hidden, (t + 1) * hidden), (v) => v * (gemma ? Math.fround(Math.sqrt(hidden)) : 1)),
  );
  for (let layer = 0; layer < dims.numLayers; layer++) {
    const name = (part: string) => `blk.${layer}.${part}.weight`;
    const frequencies = gemma && isLocal(layer) ? localFrequencies : globalFrequencies;
    const window = isLocal(layer) ? dims.slidingWindow : 0;
    const qs: Vector[][] = [];
    const ks: Vector[][] = [];
    const vs: Vector[][] = [];
    for (let t = 0; t < n; t++) {
      const h = rms(xs[t]!, name("attn_norm"));
      let q: Vector, k: Vector, v: Vector;
      if (arch === "phi3") {
        const qkv = matvec(name("attn_qkv"), h);
        q = qkv.subarray(0, numHeads * headDim);
        k = qkv.subarray(numHeads * headDim, (numHeads + numKVHeads) * headDim);
        v = qkv.subarray((numHeads + numKVHeads) * headDim);
      } else {
        [q, k, v] = [matvec(name("attn_q"), h), matvec(name("attn_k"), h), matvec(name("attn_v"), h)];
      }
      const heads = (x: Vector, count: number): Vector[] => Array.from({ length: count }, (_, i) => x.slice(i * headDim, (i + 1) * headDim));
      let qHeads = heads(q, numHeads);
      let kHeads = heads(k, numKVHeads);
      if (arch === "qwen3" || gemma) {
        qHeads = qHeads.map((x) => rms(x, name("attn_q_norm")));
        kHeads = kHeads.map((x) => rms(x, name("attn_k_norm")));
      }
      qs.push(qHeads.map((x) => rope(x, t, frequencies)));
      ks.push(kHeads.map((x) => rope(x, t, frequencies)));
      vs.push(heads(v, numKVHeads));
    }
    const scale = 1 / Math.sqrt(headDim);
    xs = xs.map((x, t) => {
      const attended = new Float64Array(numHeads * headDim);
      for (let h = 0; h < numHeads; h++) {
        const kv = Math.floor(h / (numHeads / numKVHeads));
        const visible = Array.from({ length: t + 1 }, (_, j) => j).filter((j) => window === 0 || t - j < window);
        const scores = visible.map((j) => qs[t]![h]!.reduce((s, qv, d) => s + qv * ks[j]![kv]![d]!, 0) * scale);
        const max = Math.max(...scores);
        const exps = scores.map((s) => Math.exp(s - max));
        const total = exps.reduce((a, b) => a + b, 0);
        visible.forEach((j, i) => vs[j]![kv]!.forEach((value, d) => (attended[h * headDim + d] += (exps[i]! / total) * value)));
      }
      let o = matvec(name("attn_output"), attended);
      if (gemma) o = rms(o, name("post_attention_norm"));
      const mid = x.map((v, i) => v + o[i]!);
      const h = rms(mid, name("ffn_norm"));
      let gate: Vector, up: Vector;
      if (arch === "phi3") {
        const gateUp = matvec(name("ffn_up"), h);
        [gate, up] = [gateUp.subarray(0, ffnSize), gateUp.subarray(ffnSize)];
      } else {
        [gate, up] = [matvec(name("ffn_gate"), h), matvec(name("ffn_up"), h)];
      }
      let m = matvec(name("ffn_down"), gate.map((g, i) => act(g) * up[i]!));
      if (gemma) m = rms(m, name("post_ffw_norm"));
      return mid.map((v, i) => v + m[i]!);
    });
  }
  const outputName = weights.has("output.weight") ? "output.weight" : "token_embd.weight";
  return xs.map((x) => matvec(outputName, rms(x, "output_norm.weight")));
}
