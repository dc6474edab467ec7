/** A LoRA adapter in memory, whichever file it came from: its settings and its A/B pairs. */
import { InferenceError, type LoRAConfig } from "@infer/core";
import { LORA_MODULES, type LoraModule, type PairTensorName } from "./modules.js";

/** One adapted projection: W x + scale * B (A x). */
export interface LoraPair {
  layer: number;
  module: LoraModule;
  rank: number;
  inFeatures: number;
  outFeatures: number;
  /** [rank, inFeatures], row-major (PEFT's lora_A.weight). */
  a: Float32Array;
  /** [outFeatures, rank], row-major (PEFT's lora_B.weight). */
  b: Float32Array;
}

/**
 * The q/k row order the pairs were made for: a Hugging Face checkpoint's, or a
 * GGUF "llama" file's, whose converter permuted q/k rows for llama.cpp's
 * rotary layout (B's rows follow their weight's).
 */
export type LoraLayout = "hf" | "gguf";

export interface LoraAdapter extends LoRAConfig {
  targetModules: LoraModule[];
  /** PEFT's use_rslora: scale alpha / sqrt(rank) instead of alpha / rank. */
  useRslora: boolean;
  /** PEFT's base_model_name_or_path, when the file names it. */
  baseModel?: string;
  layout: LoraLayout;
  /** The base's architecture as the file states it (a GGUF adapter's general.architecture). */
  architecture?: string;
  pairs: LoraPair[];
  /** The file or folder it was read from, for messages. */
  source: string;
}

/** The factor B (A x) is multiplied by, as PEFT and llama.cpp compute it. */
export function pairScale(adapter: Pick<LoraAdapter, "alpha" | "useRslora">, pair: Pick<LoraPair, "rank">): number {
  return adapter.useRslora ? adapter.alpha / Math.sqrt(pair.rank) : adapter.alpha / pair.rank;
}

/** A tensor of an adapter file, decoded: which half of which pair, its shape, its values. */
export interface PairTensor extends PairTensorName {
  /** The file's own name for it, for messages. */
  name: string;
  /** Row-major. */
  shape: number[];
  values: Float32Array;
}

export function formatError(file: string, field: string, problem: string): InferenceError {
  return new InferenceError("MODEL_FORMAT", `${file}: ${field}: ${problem}`, { details: { file, field } });
}

/** Joins A and B halves into pairs, checking each has both, of agreeing shapes: [r, in] and [out, r]. */
export function assemblePairs(tensors: readonly PairTensor[], file: string): LoraPair[] {
  const halves = new Map<string, { a?: PairTensor; b?: PairTensor }>();
  for (const tensor of tensors) {
    const key = `${tensor.layer}.${tensor.module}`;
    const entry = halves.get(key) ?? {};
    if (tensor.shape.length !== 2 || tensor.shape.some((d) => d < 1)) {
      throw formatError(file, tensor.name, `shape [${tensor.shape.join(", ")}] is not a matrix`);
    }
    entry[tensor.half === "A" ? "a" : "b"] = tensor;
    halves.set(key, entry);
  }
  const pairs: LoraPair[] = [];
  for (const { a, b } of halves.values()) {
    const present = (a ?? b)!;
    if (!a || !b) throw formatError(file, present.name, `has no lora_${a ? "B" : "A"} partner`);
    const [rank, inFeatures] = a.shape as [number, number];
    const [outFeatures, bRank] = b.shape as [number, number];
    if (bRank !== rank) {
      throw formatError(file, b.name, `shape [${b.shape.join(", ")}] does not match rank ${rank} of ${a.name} [${a.shape.join(", ")}]`);
    }
    pairs.push({ layer: a.layer, module: a.module, rank, inFeatures, outFeatures, a: a.values, b: b.values });
  }
  if (pairs.length === 0) throw formatError(file, "tensors", "holds no LoRA pairs");
  return pairs.sort((x, y) => x.layer - y.layer || LORA_MODULES.indexOf(x.module) - LORA_MODULES.indexOf(y.module));
}

/** Target modules present among the pairs, in the table's order. */
export function modulesOf(pairs: readonly LoraPair[]): LoraModule[] {
  const present = new Set(pairs.map((p) => p.module));
  return LORA_MODULES.filter((m) => present.has(m));
}
