import { InferenceError } from "@infer/core";
import { GgmlType, fileTypeId, typeName } from "@infer/formats";
import { lora } from "@infer/wasm";
import type { ArchPlan } from "./config.js";

/** Hugging Face names of one decoder layer's tensors -> llama.cpp's. */
const LAYER_NAMES: Record<string, string> = {
  "input_layernorm.weight": "attn_norm.weight",
  "self_attn.q_proj.weight": "attn_q.weight",
  "self_attn.k_proj.weight": "attn_k.weight",
  "self_attn.v_proj.weight": "attn_v.weight",
  "self_attn.o_proj.weight": "attn_output.weight",
  "self_attn.q_proj.bias": "attn_q.bias",
  "self_attn.k_proj.bias": "attn_k.bias",
  "self_attn.v_proj.bias": "attn_v.bias",
  "self_attn.q_norm.weight": "attn_q_norm.weight",
  "self_attn.k_norm.weight": "attn_k_norm.weight",
  "post_attention_layernorm.weight": "ffn_norm.weight",
  "mlp.gate_proj.weight": "ffn_gate.weight",
  "mlp.up_proj.weight": "ffn_up.weight",
  "mlp.down_proj.weight": "ffn_down.weight",
};

const GLOBAL_NAMES: Record<string, string> = {
  "model.embed_tokens.weight": "token_embd.weight",
  "model.norm.weight": "output_norm.weight",
  "lm_head.weight": "output.weight",
};

/** Tensors llama.cpp recomputes itself. */
const SKIPPED = /(^|\.)rotary_emb\.inv_freq$/;

/** The llama.cpp name of a Hugging Face tensor; undefined for tensors that are not written. */
export function ggufName(hfName: string, layers: number): string | undefined {
  if (SKIPPED.test(hfName)) return undefined;
  if (GLOBAL_NAMES[hfName]) return GLOBAL_NAMES[hfName];
  const layer = /^model\.layers\.(\d+)\.(.+)$/.exec(hfName);
  if (layer && Number(layer[1]) < layers && LAYER_NAMES[layer[2]!]) return `blk.${Number(layer[1])}.${LAYER_NAMES[layer[2]!]}`;
  throw new InferenceError("UNSUPPORTED", `tensor '${hfName}' has no GGUF counterpart in this converter`, { details: { tensor: hfName } });
}

/** The converter permutes q/k rows as LoRA adapters' B rows are permuted: one implementation, the engine's. */
export const permuteRotaryRows = lora.permuteRotaryRows;

export const OUTPUT_TYPES = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0 } as const;
export type OutputType = keyof typeof OUTPUT_TYPES;

/** llama.cpp's general.file_type for an output type: the file type named as its ggml type. */
export function fileTypeOf(type: OutputType): number {
  const id = fileTypeId(typeName(OUTPUT_TYPES[type]));
  if (id === undefined) throw new InferenceError("INTERNAL", `no GGUF file type is named ${typeName(OUTPUT_TYPES[type])}`);
  return id;
}

/**
 * Norms and biases stay F32 (small, and precision matters); matrices take the
 * asked type, falling back to F16 when their rows do not split into 32-value blocks.
 */
export function tensorType(shape: number[], wanted: OutputType): GgmlType {
  if (shape.length < 2) return GgmlType.F32;
  const type = OUTPUT_TYPES[wanted];
  if ((type === GgmlType.Q8_0 || type === GgmlType.Q4_0) && shape[shape.length - 1]! % 32 !== 0) return GgmlType.F16;
  return type;
}

export function permuteIfRotary(plan: ArchPlan, name: string, values: Float32Array, cols: number): Float32Array {
  if (!plan.permuteQK) return values;
  if (name.endsWith(".attn_q.weight")) return permuteRotaryRows(values, plan.heads, cols);
  if (name.endsWith(".attn_k.weight")) return permuteRotaryRows(values, plan.kvHeads, cols);
  return values;
}
