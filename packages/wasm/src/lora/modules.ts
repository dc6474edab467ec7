/**
 * The projections a LoRA adapter may attach to, named three ways: PEFT's
 * module name (q_proj), the engine's and GGUF's block tensor (blk.N.attn_q),
 * and the Hugging Face path inside model.layers.N (self_attn.q_proj, from
 * arch/common's table, so each fact is stated once).
 */
import { InferenceError, LORA_TARGET_MODULES } from "@infer/core";
import { HF_LAYER_NAMES } from "../arch/common.js";

/** A PEFT module name: core's list of the projections LoRA attaches to. */
export type LoraModule = (typeof LORA_TARGET_MODULES)[number];

/** PEFT module name → the GGUF block tensor part (the type makes it cover every module). */
const MODULE_PARTS: Readonly<Record<LoraModule, string>> = {
  q_proj: "attn_q",
  k_proj: "attn_k",
  v_proj: "attn_v",
  o_proj: "attn_output",
  gate_proj: "ffn_gate",
  up_proj: "ffn_up",
  down_proj: "ffn_down",
};

export const LORA_MODULES: readonly LoraModule[] = LORA_TARGET_MODULES;

export function isLoraModule(name: string): name is LoraModule {
  return Object.hasOwn(MODULE_PARTS, name);
}

/** The engine's (and GGUF's) name of the base weight a module adapts: "blk.3.attn_q.weight". */
export function baseWeightName(layer: number, module: LoraModule): string {
  return `blk.${layer}.${MODULE_PARTS[module]}.weight`;
}

/** The Hugging Face module path inside a decoder layer: "self_attn.q_proj". */
export function hfModulePath(module: LoraModule): string {
  return HF_LAYER_NAMES[MODULE_PARTS[module]]!;
}

/** PEFT's tensor name of one half of a pair: base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight. */
export function peftTensorName(layer: number, module: LoraModule, half: "A" | "B"): string {
  return `base_model.model.model.layers.${layer}.${hfModulePath(module)}.lora_${half}.weight`;
}

/** llama.cpp's tensor name of one half of a pair: blk.N.attn_q.weight.lora_a. */
export function ggufLoraTensorName(layer: number, module: LoraModule, half: "A" | "B"): string {
  return `${baseWeightName(layer, module)}.lora_${half.toLowerCase()}`;
}

const PEFT_NAME = /^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)\.lora_([AB])\.weight$/;
const GGUF_NAME = /^blk\.(\d+)\.([a-z_]+)\.weight\.lora_([ab])$/;

export interface PairTensorName {
  layer: number;
  module: LoraModule;
  half: "A" | "B";
}

/** Parses a PEFT tensor name; UNSUPPORTED naming the file and tensor for anything but a known projection's lora_A / lora_B. */
export function parsePeftTensorName(name: string, file: string): PairTensorName {
  const match = PEFT_NAME.exec(name);
  const module = match?.[3];
  if (!match || !module || !isLoraModule(module) || `${match[2]}.${module}` !== hfModulePath(module)) {
    throw unsupportedTensor(name, file);
  }
  return { layer: Number(match[1]), module, half: match[4] as "A" | "B" };
}

/** Parses a GGUF LoRA tensor name the same way. */
export function parseGgufLoraTensorName(name: string, file: string): PairTensorName {
  const match = GGUF_NAME.exec(name);
  const module = match ? LORA_MODULES.find((m) => MODULE_PARTS[m] === match[2]) : undefined;
  if (!match || !module) throw unsupportedTensor(name, file);
  return { layer: Number(match[1]), module, half: match[3] === "a" ? "A" : "B" };
}

function unsupportedTensor(name: string, file: string): InferenceError {
  return new InferenceError(
    "UNSUPPORTED",
    `${file}: tensor "${name}" is not a LoRA pair of a supported projection (${LORA_MODULES.join(", ")})`,
    { details: { file, field: name } },
  );
}
