/**
 * Small random models of every supported architecture, written as GGUF files
 * and as Hugging Face folders. The same spec and seed give the same weights in
 * both layouts (GGUF llama q/k rows permuted and Gemma norms shifted by 1 the
 * way llama.cpp's converter stores them), so both must produce the same logits.
 */
import { seededRandom } from "@infer/core/testing";
import { GgmlType, type GgufTensorSpec, type GgufValueInput, GgufValueType } from "@infer/formats";
import { writeGgufFile, writeSafetensorsFile } from "@infer/formats/node";
import { platform } from "#platform";
import { ropeInverseFrequencies, type RopeScaling } from "../engine/rope.js";
import { ARCHITECTURES } from "../arch/registry.js";
import { byteVocab, byteVocabTokenizerJson, BOS_TOKEN, EOS_TOKEN } from "./byte-vocab.js";

/** Node: the helpers write model files to disk. */
const { join, writeText } = platform.files;

export type RandomArchitecture = "llama" | "qwen2" | "qwen3" | "gemma3" | "phi3";

export interface RandomModelSpec {
  architecture: RandomArchitecture;
  seed: number;
  hiddenSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKVHeads?: number;
  headDim?: number;
  ffnSize?: number;
  contextLength?: number;
  ropeTheta?: number;
  rmsEps?: number;
  tiedEmbeddings?: boolean;
  /** Gemma 3 (sliding layers) and Phi-3 (all layers) only; default 8 for Gemma 3, the context length for Phi-3. */
  slidingWindow?: number;
  /** Llama only: Llama 3.1 RoPE scaling (HF rope_scaling; GGUF rope_freqs.weight). */
  llama3RopeScaling?: { factor: number; lowFreqFactor: number; highFreqFactor: number; originalContextLength: number };
  /**
   * Phi-3 only: LongRoPE trained for `originalContextLength` positions (below contextLength),
   * with fixed short factors 1 + 0.1 i and long factors 1 + 0.5 i.
   */
  longRope?: { originalContextLength: number };
  /**
   * Hugging Face folders only: rows of the embedding (and LM head), at least
   * the byte vocabulary's; the rows past it are tokens the tokenizer never
   * produces, as in real models' padded vocabularies. Default: the byte vocabulary.
   */
  vocabSize?: number;
}

/** LongRoPE factors and attention factor of a random Phi-3 spec (HF's formula for the factor). */
export function longRopeParameters(dims: RandomModelDims): { short: number[]; long: number[]; attentionFactor: number } {
  const pairs = dims.headDim / 2;
  const original = dims.longRope!.originalContextLength;
  const factor = dims.contextLength / original;
  return {
    short: Array.from({ length: pairs }, (_, i) => 1 + 0.1 * i),
    long: Array.from({ length: pairs }, (_, i) => 1 + 0.5 * i),
    attentionFactor: factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original)),
  };
}

export interface RandomGgufSpec extends RandomModelSpec {
  /** Encoding of the weight matrices (norms and biases stay F32). Default F32. */
  type?: GgmlType;
}

export interface RandomHfSpec extends RandomModelSpec {
  dtype?: "F32" | "F16" | "BF16";
}

/** Dimensions with every default filled in. */
export type RandomModelDims = Required<Omit<RandomModelSpec, "llama3RopeScaling" | "longRope">> &
  Pick<RandomModelSpec, "llama3RopeScaling" | "longRope"> & { vocabSize: number };

/** Gemma 3's local layers: every 6th layer is global (llama.cpp hard-codes 6). */
const GEMMA3_PATTERN = 6;
const GEMMA3_LOCAL_ROPE_BASE = 10000;

export function randomModelDims(spec: RandomModelSpec): RandomModelDims {
  const gemma = spec.architecture === "gemma3";
  const hiddenSize = spec.hiddenSize ?? 64;
  const numHeads = spec.numHeads ?? 4;
  const contextLength = spec.contextLength ?? 128;
  return {
    architecture: spec.architecture,
    seed: spec.seed,
    hiddenSize,
    // Six Gemma layers so both local and global layers occur.
    numLayers: spec.numLayers ?? (gemma ? GEMMA3_PATTERN : 2),
    numHeads,
    numKVHeads: spec.numKVHeads ?? 2,
    // Qwen3 and Gemma 3 state head_dim apart from hidden / heads; test that.
    headDim: spec.headDim ?? (spec.architecture === "qwen3" || gemma ? 32 : hiddenSize / numHeads),
    ffnSize: spec.ffnSize ?? 128,
    contextLength,
    ropeTheta: spec.ropeTheta ?? (gemma ? 1_000_000 : 10000),
    rmsEps: spec.rmsEps ?? 1e-5,
    tiedEmbeddings: spec.tiedEmbeddings ?? gemma,
    // Only Gemma 3 and Phi-3 carry a window (llama.cpp ignores one on llama/qwen GGUFs).
    slidingWindow: gemma ? (spec.slidingWindow ?? 8) : spec.architecture === "phi3" ? (spec.slidingWindow ?? contextLength) : 0,
    llama3RopeScaling: spec.llama3RopeScaling,
    longRope: spec.longRope,
    vocabSize: Math.max(spec.vocabSize ?? 0, byteVocab().tokens.length),
  };
}

/** A weight in Hugging Face layout, named the GGUF way. shape: row-major. */
interface RandomTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** The model's weights, HF semantics (rotate_half q/k rows, Gemma norms as w in (1 + w)). */
export function randomTensors(dims: RandomModelDims): RandomTensor[] {
  const random = seededRandom(dims.seed);
  const uniform = (count: number, scale: number, offset = 0) =>
    Float32Array.from({ length: count }, () => offset + (2 * random() - 1) * scale);
  const tensors: RandomTensor[] = [];
  const matrix = (name: string, rows: number, cols: number) =>
    tensors.push({ name, shape: [rows, cols], data: uniform(rows * cols, 1 / Math.sqrt(cols)) });
  // Gemma's HF norms hold w for (1 + w); the others hold the weight itself.
  const normOffset = dims.architecture === "gemma3" ? 0 : 1;
  const vector = (name: string, length: number, scale: number, offset: number) =>
    tensors.push({ name, shape: [length], data: uniform(length, scale, offset) });

  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, ffnSize, vocabSize } = dims;
  const qDim = numHeads * headDim;
  const kvDim = numKVHeads * headDim;
  // Inputs of unit scale keep the token identity strong in the residual stream, so greedy
  // decoding of these random models wanders instead of repeating one token. Gemma multiplies
  // its embeddings by sqrt(hidden) itself (and reuses them as the output projection).
  const embeddingScale = dims.architecture === "gemma3" ? 1 / Math.sqrt(hidden) : 1;
  tensors.push({ name: "token_embd.weight", shape: [vocabSize, hidden], data: uniform(vocabSize * hidden, embeddingScale) });
  for (let i = 0; i < dims.numLayers; i++) {
    const name = (part: string, kind = "weight") => `blk.${i}.${part}.${kind}`;
    vector(name("attn_norm"), hidden, 0.2, normOffset);
    if (dims.architecture === "phi3") {
      matrix(name("attn_qkv"), qDim + 2 * kvDim, hidden);
    } else {
      matrix(name("attn_q"), qDim, hidden);
      matrix(name("attn_k"), kvDim, hidden);
      matrix(name("attn_v"), kvDim, hidden);
    }
    if (dims.architecture === "qwen2") {
      vector(name("attn_q", "bias"), qDim, 0.1, 0);
      vector(name("attn_k", "bias"), kvDim, 0.1, 0);
      vector(name("attn_v", "bias"), kvDim, 0.1, 0);
    }
    if (dims.architecture === "qwen3" || dims.architecture === "gemma3") {
      vector(name("attn_q_norm"), headDim, 0.2, normOffset);
      vector(name("attn_k_norm"), headDim, 0.2, normOffset);
    }
    matrix(name("attn_output"), hidden, qDim);
    if (dims.architecture === "gemma3") vector(name("post_attention_norm"), hidden, 0.2, normOffset);
    vector(name("ffn_norm"), hidden, 0.2, normOffset);
    if (dims.architecture === "phi3") {
      matrix(name("ffn_up"), 2 * ffnSize, hidden);
    } else {
      matrix(name("ffn_gate"), ffnSize, hidden);
      matrix(name("ffn_up"), ffnSize, hidden);
    }
    matrix(name("ffn_down"), hidden, ffnSize);
    if (dims.architecture === "gemma3") vector(name("post_ffw_norm"), hidden, 0.2, normOffset);
  }
  vector("output_norm.weight", hidden, 0.2, normOffset);
  if (!dims.tiedEmbeddings) matrix("output.weight", vocabSize, hidden);
  return tensors;
}

// ---- GGUF --------------------------------------------------------------------

const f32 = (value: number): GgufValueInput => ({ type: GgufValueType.FLOAT32, value });
const u32 = (value: number): GgufValueInput => ({ type: GgufValueType.UINT32, value });

/** Writes a random model as GGUF (llama.cpp's layout and metadata keys); returns the dims used. */
export async function writeRandomGguf(path: string, spec: RandomGgufSpec): Promise<RandomModelDims> {
  const dims = randomModelDims(spec);
  // A GGUF states one token per embedding row, and the byte vocabulary has no more.
  if (dims.vocabSize !== byteVocab().tokens.length) throw new Error("writeRandomGguf: vocabSize is for Hugging Face folders only");
  const type = spec.type ?? GgmlType.F32;
  const arch = dims.architecture;
  const vocab = byteVocab();
  const metadata: Record<string, GgufValueInput> = {
    "general.architecture": arch,
    // No architecture in the name: llama.cpp patches token attributes of models named "phi3",
    // looking up "</s>" and friends, which this vocabulary does not have.
    "general.name": `infer random model, seed ${dims.seed}`,
    [`${arch}.vocab_size`]: u32(dims.vocabSize),
    [`${arch}.context_length`]: u32(dims.contextLength),
    [`${arch}.embedding_length`]: u32(dims.hiddenSize),
    [`${arch}.block_count`]: u32(dims.numLayers),
    [`${arch}.feed_forward_length`]: u32(dims.ffnSize),
    [`${arch}.attention.head_count`]: u32(dims.numHeads),
    [`${arch}.attention.head_count_kv`]: u32(dims.numKVHeads),
    [`${arch}.attention.key_length`]: u32(dims.headDim),
    [`${arch}.attention.value_length`]: u32(dims.headDim),
    [`${arch}.attention.layer_norm_rms_epsilon`]: f32(dims.rmsEps),
    [`${arch}.rope.freq_base`]: f32(dims.ropeTheta),
    [`${arch}.rope.dimension_count`]: u32(dims.headDim),
    "tokenizer.ggml.model": "gpt2",
    "tokenizer.ggml.pre": "gpt-2",
    "tokenizer.ggml.tokens": vocab.tokens,
    "tokenizer.ggml.token_type": Int32Array.from(vocab.tokenTypes),
    "tokenizer.ggml.merges": vocab.merges,
    "tokenizer.ggml.bos_token_id": u32(vocab.bosId),
    "tokenizer.ggml.eos_token_id": u32(vocab.eosId),
    "tokenizer.ggml.add_bos_token": false,
  };
  if (dims.slidingWindow > 0) metadata[`${arch}.attention.sliding_window`] = u32(dims.slidingWindow);

  const tensors: GgufTensorSpec[] = randomTensors(dims).map((tensor) => {
    let data = tensor.data;
    if (arch === "llama" && /attn_q\.weight$/.test(tensor.name)) data = permuteForNormalRope(data, dims.numHeads, dims.headDim);
    if (arch === "llama" && /attn_k\.weight$/.test(tensor.name)) data = permuteForNormalRope(data, dims.numKVHeads, dims.headDim);
    // llama.cpp's converter folds Gemma's (1 + w) into the stored norm weights.
    if (arch === "gemma3" && tensor.name.endsWith("norm.weight")) data = data.map((w) => w + 1);
    const isMatrix = tensor.shape.length === 2;
    return { name: tensor.name, shape: [...tensor.shape].reverse(), type: isMatrix ? type : GgmlType.F32, data };
  });
  if (dims.llama3RopeScaling) {
    tensors.push({ name: "rope_freqs.weight", shape: [dims.headDim / 2], type: GgmlType.F32, data: llama3FreqFactors(dims) });
  }
  if (dims.longRope) {
    const { short, long, attentionFactor } = longRopeParameters(dims);
    metadata[`${arch}.rope.scaling.attn_factor`] = f32(attentionFactor);
    metadata[`${arch}.rope.scaling.original_context_length`] = u32(dims.longRope.originalContextLength);
    const factorTensor = (name: string, values: number[]): GgufTensorSpec =>
      ({ name, shape: [values.length], type: GgmlType.F32, data: Float32Array.from(values) });
    tensors.push(factorTensor("rope_factors_long.weight", long), factorTensor("rope_factors_short.weight", short));
  }
  await writeGgufFile(path, { metadata, tensors });
  return dims;
}

/**
 * llama.cpp's HF→GGUF permutation of llama q/k rows: within each head, HF row
 * s * headDim/2 + i (rotate_half pairs) becomes row 2i + s (adjacent pairs).
 */
export function permuteForNormalRope(hf: Float32Array, heads: number, headDim: number): Float32Array {
  const cols = hf.length / (heads * headDim);
  const out = new Float32Array(hf.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const from = (h * headDim + s * half + i) * cols;
        const to = (h * headDim + 2 * i + s) * cols;
        out.set(hf.subarray(from, from + cols), to);
      }
    }
  }
  return out;
}

/** rope_freqs.weight: each pair's unscaled frequency over its Llama 3.1-scaled one. */
function llama3FreqFactors(dims: RandomModelDims): Float32Array {
  const scaling: RopeScaling = { type: "llama3", ...dims.llama3RopeScaling! };
  const plain = ropeInverseFrequencies(dims.headDim, dims.ropeTheta, { type: "none" });
  const scaled = ropeInverseFrequencies(dims.headDim, dims.ropeTheta, scaling);
  return Float32Array.from(plain, (frequency, i) => frequency / scaled[i]!);
}

// ---- Hugging Face --------------------------------------------------------------

const HF_CLASS: Record<RandomArchitecture, [modelType: string, className: string]> = {
  llama: ["llama", "LlamaForCausalLM"],
  qwen2: ["qwen2", "Qwen2ForCausalLM"],
  qwen3: ["qwen3", "Qwen3ForCausalLM"],
  gemma3: ["gemma3_text", "Gemma3ForCausalLM"],
  phi3: ["phi3", "Phi3ForCausalLM"],
};

/** Writes a random model as a Hugging Face folder (config.json, model.safetensors, tokenizer files). */
export async function writeRandomHf(folder: string, spec: RandomHfSpec): Promise<RandomModelDims> {
  const dims = randomModelDims(spec);
  const { architecture: arch } = dims;
  const { hfTensorName } = ARCHITECTURES.find((a) => a.id === arch)!;
  const vocab = byteVocab();
  const [modelType, className] = HF_CLASS[arch];
  const dtype = spec.dtype ?? "F32";
  const config: Record<string, unknown> = {
    architectures: [className],
    model_type: modelType,
    vocab_size: dims.vocabSize,
    hidden_size: dims.hiddenSize,
    intermediate_size: dims.ffnSize,
    num_hidden_layers: dims.numLayers,
    num_attention_heads: dims.numHeads,
    num_key_value_heads: dims.numKVHeads,
    head_dim: dims.headDim,
    max_position_embeddings: dims.contextLength,
    rms_norm_eps: dims.rmsEps,
    rope_theta: dims.ropeTheta,
    rope_scaling: null,
    tie_word_embeddings: dims.tiedEmbeddings,
    bos_token_id: vocab.bosId,
    eos_token_id: vocab.eosId,
    torch_dtype: { F32: "float32", F16: "float16", BF16: "bfloat16" }[dtype],
    hidden_act: arch === "gemma3" ? "gelu_pytorch_tanh" : "silu",
    attention_bias: arch === "qwen2",
  };
  if (dims.llama3RopeScaling) {
    const s = dims.llama3RopeScaling;
    config.rope_scaling = {
      rope_type: "llama3",
      factor: s.factor,
      low_freq_factor: s.lowFreqFactor,
      high_freq_factor: s.highFreqFactor,
      original_max_position_embeddings: s.originalContextLength,
    };
  }
  if (dims.longRope) {
    const { short, long } = longRopeParameters(dims);
    config.original_max_position_embeddings = dims.longRope.originalContextLength;
    config.rope_scaling = { type: "longrope", short_factor: short, long_factor: long };
  }
  if (arch === "qwen2") config.use_sliding_window = false;
  if (arch === "phi3") config.sliding_window = dims.slidingWindow;
  if (arch === "gemma3") {
    Object.assign(config, {
      hidden_activation: "gelu_pytorch_tanh",
      query_pre_attn_scalar: dims.headDim,
      sliding_window: dims.slidingWindow,
      sliding_window_pattern: GEMMA3_PATTERN,
      rope_local_base_freq: GEMMA3_LOCAL_ROPE_BASE,
      final_logit_softcapping: null,
      attn_logit_softcapping: null,
    });
  }
  const tensors = randomTensors(dims).map((tensor) => ({
    name: hfTensorName(tensor.name),
    dtype,
    shape: tensor.shape,
    data: tensor.data,
  }));
  await writeText(join(folder, "config.json"), JSON.stringify(config, null, 2));
  await writeSafetensorsFile(join(folder, "model.safetensors"), tensors, { format: "pt" });
  await writeText(join(folder, "tokenizer.json"), JSON.stringify(byteVocabTokenizerJson(vocab)));
  await writeText(
    join(folder, "tokenizer_config.json"),
    JSON.stringify({ bos_token: BOS_TOKEN, eos_token: EOS_TOKEN, add_bos_token: false, tokenizer_class: "PreTrainedTokenizerFast" }),
  );
  return dims;
}
