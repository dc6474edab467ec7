/**
 * Converts a Hugging Face LlamaForCausalLM folder (F32 safetensors, a
 * SentencePiece-style BPE tokenizer.json with byte fallback) to GGUF the way
 * llama.cpp's convert_hf_to_gguf.py does for such a folder without
 * tokenizer.model:
 *
 * - vocabulary through its "llama_hf" path: tokenizer model "llama", pre
 *   "default", tokens in id order, every score -1000 (that path has no scores
 *   to give), <0xXX> tokens BYTE, the special tokens (BOS, EOS, UNK, PAD)
 *   CONTROL, the rest NORMAL; special ids and add_bos/add_eos from
 *   tokenizer_config.json;
 * - hyperparameters from config.json under "llama.*";
 * - q/k rows permuted per head from rotate_half pairs to adjacent pairs
 *   (llama.cpp's normal RoPE mode), everything else as stored.
 *
 * Only what the shared tinystories-656k folder needs: anything else (rope
 * scaling, biases, another activation, extra tensors) is refused by name
 * rather than converted wrongly.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError } from "@infer/core";
import { GgmlType, GgufTokenType, GgufValueType, toFloat32, type GgufTensorSpec, type GgufValueInput } from "@infer/formats";
import { readSafetensorsModel, writeGgufFile } from "@infer/formats/node";
import type { WasmKit } from "./wasm-link.js";

/** The score convert_hf_to_gguf.py's LlamaHfVocab gives every token. */
const HF_VOCAB_SCORE = -1000;

interface LlamaConfig {
  architectures?: string[];
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads?: number;
  head_dim?: number;
  max_position_embeddings: number;
  rms_norm_eps: number;
  rope_theta?: number;
  rope_scaling?: unknown;
  tie_word_embeddings?: boolean;
  hidden_act?: string;
  attention_bias?: boolean;
  mlp_bias?: boolean;
}

interface TokenizerJson {
  added_tokens?: { id: number; content: string }[];
  decoder?: { type?: string };
  model: { type: string; byte_fallback?: boolean; vocab: Record<string, number> };
}

type SpecialName = "bos_token" | "eos_token" | "unk_token" | "pad_token";
type TokenizerConfig = Partial<Record<SpecialName, string | { content: string } | null>> & {
  add_bos_token?: boolean;
  add_eos_token?: boolean;
};

/** Something this converter does not handle (UNSUPPORTED) or a file that contradicts itself (MODEL_FORMAT). */
function refuse(folder: string, what: string, code: "UNSUPPORTED" | "MODEL_FORMAT" = "UNSUPPORTED"): never {
  throw new InferenceError(code, `${folder}: cannot convert to GGUF: ${what}`, { details: { file: folder } });
}

async function readJson<T>(folder: string, name: string): Promise<T> {
  const path = join(folder, name);
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${path}: not readable JSON (${(error as Error).message})`, { cause: error, details: { file: path } });
  }
}

/** The config's sizes, checked before anything is sized or permuted by them. */
function checkDimensions(folder: string, config: LlamaConfig): void {
  const positive = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings"] as const;
  for (const key of positive) {
    if (!Number.isSafeInteger(config[key]) || config[key] <= 0) refuse(folder, `config.json ${key} is ${config[key]}, not a positive integer`, "MODEL_FORMAT");
  }
  const kvHeads = config.num_key_value_heads ?? config.num_attention_heads;
  if (!Number.isSafeInteger(kvHeads) || kvHeads <= 0 || config.num_attention_heads % kvHeads !== 0) {
    refuse(folder, `config.json num_key_value_heads ${kvHeads} does not divide num_attention_heads`, "MODEL_FORMAT");
  }
  const size = headDim(config);
  if (!Number.isSafeInteger(size) || size <= 0 || size % 2 !== 0) refuse(folder, `head size ${size} is not a positive even integer`, "MODEL_FORMAT");
}

/** Writes `folder` as a GGUF file at `target`. */
export async function convertHfLlamaToGguf(kit: WasmKit, folder: string, target: string): Promise<void> {
  const config = await readJson<LlamaConfig>(folder, "config.json");
  if (config.architectures?.[0] !== "LlamaForCausalLM") refuse(folder, `architectures ${JSON.stringify(config.architectures)}`);
  if (config.rope_scaling) refuse(folder, "rope_scaling is set");
  if (config.attention_bias || config.mlp_bias) refuse(folder, "attention or MLP biases");
  if ((config.hidden_act ?? "silu") !== "silu") refuse(folder, `hidden_act ${config.hidden_act}`);
  checkDimensions(folder, config);
  const metadata: Record<string, GgufValueInput> = {
    ...(await vocabularyMetadata(folder, config.vocab_size)),
    ...hyperparameters(config),
  };
  const tensors = await tensorSpecs(kit, folder, config);
  await writeGgufFile(target, { metadata, tensors });
}

function hyperparameters(config: LlamaConfig): Record<string, GgufValueInput> {
  const u32 = (value: number) => ({ type: GgufValueType.UINT32 as const, value });
  const f32 = (value: number) => ({ type: GgufValueType.FLOAT32 as const, value });
  return {
    "general.architecture": "llama",
    "general.name": "converted Hugging Face llama",
    "llama.vocab_size": u32(config.vocab_size),
    "llama.context_length": u32(config.max_position_embeddings),
    "llama.embedding_length": u32(config.hidden_size),
    "llama.block_count": u32(config.num_hidden_layers),
    "llama.feed_forward_length": u32(config.intermediate_size),
    "llama.attention.head_count": u32(config.num_attention_heads),
    "llama.attention.head_count_kv": u32(config.num_key_value_heads ?? config.num_attention_heads),
    "llama.attention.layer_norm_rms_epsilon": f32(config.rms_norm_eps),
    "llama.rope.freq_base": f32(config.rope_theta ?? 10000),
    "llama.rope.dimension_count": u32(headDim(config)),
  };
}

function headDim(config: LlamaConfig): number {
  return config.head_dim ?? config.hidden_size / config.num_attention_heads;
}

async function vocabularyMetadata(folder: string, vocabSize: number): Promise<Record<string, GgufValueInput>> {
  const tokenizer = await readJson<TokenizerJson>(folder, "tokenizer.json");
  const tokenizerConfig = await readJson<TokenizerConfig>(folder, "tokenizer_config.json");
  // convert_hf_to_gguf.py takes the llama_hf path only for this kind of tokenizer.json.
  if (tokenizer.model.type !== "BPE" || !tokenizer.model.byte_fallback || tokenizer.decoder?.type !== "Sequence") {
    refuse(folder, "tokenizer.json is not a BPE tokenizer with byte fallback and a Sequence decoder");
  }
  // Sized by the entries the file holds: ids must number them 0..n-1, and n must be config.json's vocab_size.
  const byId = new Map<number, string>();
  for (const [content, id] of Object.entries(tokenizer.model.vocab)) byId.set(id, content);
  for (const added of tokenizer.added_tokens ?? []) byId.set(added.id, added.content);
  if (byId.size !== vocabSize) refuse(folder, `tokenizer.json has ${byId.size} tokens, config.json vocab_size is ${vocabSize}`, "MODEL_FORMAT");
  const tokens: string[] = [];
  const idOf = new Map<string, number>();
  for (let id = 0; id < vocabSize; id++) {
    const content = byId.get(id);
    if (content === undefined) refuse(folder, `tokenizer.json has no token with id ${id}`, "MODEL_FORMAT");
    tokens.push(content);
    idOf.set(content, id);
  }

  const special = new Map<SpecialName, number>();
  for (const name of ["bos_token", "eos_token", "unk_token", "pad_token"] as const) {
    const entry = tokenizerConfig[name];
    if (entry === undefined || entry === null) continue;
    const content = typeof entry === "string" ? entry : entry.content;
    const id = idOf.get(content);
    if (id === undefined) refuse(folder, `tokenizer_config.json ${name} ${JSON.stringify(content)} is not in the vocabulary`, "MODEL_FORMAT");
    special.set(name, id);
  }
  const controlIds = new Set(special.values());
  const tokenTypes = Int32Array.from(tokens, (content, id) =>
    /^<0x[0-9A-Fa-f]{2}>$/.test(content) ? GgufTokenType.Byte : controlIds.has(id) ? GgufTokenType.Control : GgufTokenType.Normal,
  );

  const u32 = (value: number) => ({ type: GgufValueType.UINT32 as const, value });
  const metadata: Record<string, GgufValueInput> = {
    "tokenizer.ggml.model": "llama",
    "tokenizer.ggml.pre": "default",
    "tokenizer.ggml.tokens": tokens,
    "tokenizer.ggml.scores": new Float32Array(vocabSize).fill(HF_VOCAB_SCORE),
    "tokenizer.ggml.token_type": tokenTypes,
  };
  const keys: Record<SpecialName, string> = {
    bos_token: "tokenizer.ggml.bos_token_id",
    eos_token: "tokenizer.ggml.eos_token_id",
    unk_token: "tokenizer.ggml.unknown_token_id",
    pad_token: "tokenizer.ggml.padding_token_id",
  };
  for (const [name, id] of special) metadata[keys[name]] = u32(id);
  if (tokenizerConfig.add_bos_token !== undefined) metadata["tokenizer.ggml.add_bos_token"] = tokenizerConfig.add_bos_token;
  if (tokenizerConfig.add_eos_token !== undefined) metadata["tokenizer.ggml.add_eos_token"] = tokenizerConfig.add_eos_token;
  return metadata;
}

/** HF names below model.layers.N. and their GGUF names below blk.N. */
const LAYER_TENSORS: Record<string, string> = {
  "input_layernorm.weight": "attn_norm.weight",
  "self_attn.q_proj.weight": "attn_q.weight",
  "self_attn.k_proj.weight": "attn_k.weight",
  "self_attn.v_proj.weight": "attn_v.weight",
  "self_attn.o_proj.weight": "attn_output.weight",
  "post_attention_layernorm.weight": "ffn_norm.weight",
  "mlp.gate_proj.weight": "ffn_gate.weight",
  "mlp.up_proj.weight": "ffn_up.weight",
  "mlp.down_proj.weight": "ffn_down.weight",
};

async function tensorSpecs(kit: WasmKit, folder: string, config: LlamaConfig): Promise<GgufTensorSpec[]> {
  const { tensors, metadata } = await readSafetensorsModel(folder);
  // A tied checkpoint may store the shared matrix under one name only and record the
  // other as an alias in __metadata__ (this one keeps lm_head.weight, aliasing
  // model.embed_tokens.weight to it).
  const stored = (name: string) => tensors.get(name) ?? tensors.get(metadata[name] ?? "");
  const tied = config.tie_word_embeddings ?? false;
  const headSize = headDim(config);
  const specs: GgufTensorSpec[] = [];
  const used = new Set<string>();
  /** rotaryHeads: for q/k, the heads whose rows are permuted to llama.cpp's adjacent RoPE pairs. */
  const add = (hfName: string, ggufName: string, rotaryHeads?: number) => {
    const tensor = stored(hfName);
    if (!tensor) refuse(folder, `tensor ${hfName} is missing`, "MODEL_FORMAT");
    if (tensor.dtype !== "F32") refuse(folder, `tensor ${hfName} is ${tensor.dtype}, not F32`);
    used.add(tensor.name);
    let values = toFloat32(tensor);
    if (rotaryHeads !== undefined) {
      // [heads * headSize, hidden]: the permutation works per head, so the rows must be exactly that.
      if (tensor.shape.length !== 2 || tensor.shape[0] !== rotaryHeads * headSize) {
        refuse(folder, `tensor ${hfName} has shape [${tensor.shape}], not [${rotaryHeads * headSize}, hidden]`, "MODEL_FORMAT");
      }
      values = kit.permuteForNormalRope(values, rotaryHeads, headSize);
    }
    specs.push({ name: ggufName, shape: [...tensor.shape].reverse(), type: GgmlType.F32, data: values });
  };

  add("model.embed_tokens.weight", "token_embd.weight");
  for (let layer = 0; layer < config.num_hidden_layers; layer++) {
    for (const [hfPart, ggufPart] of Object.entries(LAYER_TENSORS)) {
      const rotaryHeads =
        hfPart === "self_attn.q_proj.weight"
          ? config.num_attention_heads
          : hfPart === "self_attn.k_proj.weight"
            ? (config.num_key_value_heads ?? config.num_attention_heads)
            : undefined;
      add(`model.layers.${layer}.${hfPart}`, `blk.${layer}.${ggufPart}`, rotaryHeads);
    }
  }
  add("model.norm.weight", "output_norm.weight");
  // Tied: llama.cpp reuses token_embd.weight as the output projection when output.weight is absent.
  if (!tied) add("lm_head.weight", "output.weight");
  const leftOver = [...tensors.keys()].filter((name) => !used.has(name) && !name.endsWith("rotary_emb.inv_freq"));
  if (leftOver.length > 0) refuse(folder, `tensors it does not know how to convert: ${leftOver.join(", ")}`);
  return specs;
}
