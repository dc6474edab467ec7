/**
 * PEFT's adapter folder, in memory: adapter_config.json's LoRA fields and
 * adapter_model.safetensors' pairs, read and written. Files: peft-folder.ts.
 */
import { InferenceError, parseModelJson } from "@infer/core";
import { parseSafetensors, toFloat32, writeSafetensors, type SafetensorsTensorSpec } from "@infer/formats";
import { assemblePairs, formatError, modulesOf, type LoraAdapter, type PairTensor } from "./adapter.js";
import { isLoraModule, LORA_MODULES, type LoraModule, parsePeftTensorName, peftTensorName } from "./modules.js";

export const PEFT_CONFIG_FILE = "adapter_config.json";
export const PEFT_WEIGHTS_FILE = "adapter_model.safetensors";

/** The LoRA settings adapter_config.json holds, checked. */
export interface PeftConfig {
  rank: number;
  alpha: number;
  dropout: number;
  /** undefined when the file gives a regular expression or "all-linear": the tensors then say which. */
  targetModules: LoraModule[] | undefined;
  useRslora: boolean;
  baseModel?: string;
}

function unsupported(file: string, field: string, problem: string): InferenceError {
  return new InferenceError("UNSUPPORTED", `${file}: ${field}: ${problem}`, { details: { file, field } });
}

/** Parses adapter_config.json; MODEL_FORMAT or UNSUPPORTED naming the file and field. */
export function parsePeftConfig(text: string, file: string): PeftConfig {
  const json = parseModelJson(text, file);
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw formatError(file, "(root)", "is not a JSON object");
  const config = json as Record<string, unknown>;
  if (config.peft_type !== "LORA") throw unsupported(file, "peft_type", `${JSON.stringify(config.peft_type)} is not "LORA"`);
  const taskType = config.task_type;
  if (taskType !== undefined && taskType !== null && taskType !== "CAUSAL_LM") {
    throw unsupported(file, "task_type", `${JSON.stringify(taskType)}: only CAUSAL_LM adapters apply to a language model`);
  }
  const rank = config.r;
  if (typeof rank !== "number" || !Number.isSafeInteger(rank) || rank < 1) throw formatError(file, "r", `${JSON.stringify(rank)} is not a positive integer`);
  const alpha = config.lora_alpha;
  if (typeof alpha !== "number" || !Number.isFinite(alpha) || alpha <= 0) {
    throw formatError(file, "lora_alpha", `${JSON.stringify(alpha)} is not a positive number`);
  }
  const dropout = config.lora_dropout ?? 0;
  if (typeof dropout !== "number" || !(dropout >= 0 && dropout < 1)) throw formatError(file, "lora_dropout", `${JSON.stringify(dropout)} is not in [0, 1)`);
  // Settings that change what the tensors mean, which this reader does not implement: refused, not ignored.
  const refuse = (field: string, isSet: (value: unknown) => boolean, why: string) => {
    if (isSet(config[field])) throw unsupported(file, field, `${JSON.stringify(config[field])}: ${why}`);
  };
  const nonEmpty = (value: unknown) =>
    value !== undefined && value !== null && (Array.isArray(value) ? value.length > 0 : typeof value !== "object" || Object.keys(value).length > 0);
  refuse("use_dora", (v) => v === true, "DoRA adapters are not supported");
  refuse("fan_in_fan_out", (v) => v === true, "transposed (Conv1D) weights are not supported");
  refuse("bias", (v) => v !== undefined && v !== null && v !== "none", "adapters with trained biases are not supported");
  refuse("lora_bias", (v) => v === true, "adapters with trained biases are not supported");
  refuse("rank_pattern", nonEmpty, "per-module ranks are not supported");
  refuse("alpha_pattern", nonEmpty, "per-module alphas are not supported");
  refuse("modules_to_save", nonEmpty, "fully trained extra modules are not supported");
  refuse("target_parameters", nonEmpty, "adapters on raw parameters (not modules) are not supported");
  refuse("trainable_token_indices", nonEmpty, "trained token embeddings are not supported");
  const useRslora = config.use_rslora === true;
  const baseModel = typeof config.base_model_name_or_path === "string" ? config.base_model_name_or_path : undefined;
  return { rank, alpha, dropout, targetModules: readTargets(config.target_modules, file), useRslora, baseModel };
}

function readTargets(value: unknown, file: string): LoraModule[] | undefined {
  if (typeof value === "string") return undefined;
  if (!Array.isArray(value) || value.length === 0 || !value.every((m) => typeof m === "string")) {
    throw formatError(file, "target_modules", `${JSON.stringify(value)} is not a list of module names`);
  }
  for (const module of value as string[]) {
    if (!isLoraModule(module)) {
      throw new InferenceError("UNSUPPORTED", `${file}: target_modules: "${module}" is not a supported module (${LORA_MODULES.join(", ")})`, {
        details: { file, field: "target_modules", module },
      });
    }
  }
  return LORA_MODULES.filter((m) => (value as string[]).includes(m));
}

/** An adapter from adapter_config.json's parsed settings and adapter_model.safetensors' bytes. */
export function peftAdapterFromBytes(config: PeftConfig, weights: Uint8Array, source: string, weightsFile: string): LoraAdapter {
  const file = parseSafetensors(weights, weightsFile);
  const tensors: PairTensor[] = [];
  for (const tensor of file.tensors.values()) {
    const name = parsePeftTensorName(tensor.name, weightsFile);
    tensors.push({ ...name, name: tensor.name, shape: tensor.shape, values: toFloat32(tensor) });
  }
  const pairs = assemblePairs(tensors, weightsFile);
  for (const pair of pairs) {
    if (pair.rank !== config.rank) {
      throw formatError(weightsFile, peftTensorName(pair.layer, pair.module, "A"), `rank ${pair.rank} is not the config's r = ${config.rank}`);
    }
    if (config.targetModules && !config.targetModules.includes(pair.module)) {
      throw formatError(weightsFile, peftTensorName(pair.layer, pair.module, "A"), `adapts ${pair.module}, which target_modules does not name`);
    }
  }
  return {
    rank: config.rank,
    alpha: config.alpha,
    dropout: config.dropout,
    targetModules: config.targetModules ?? modulesOf(pairs),
    useRslora: config.useRslora,
    baseModel: config.baseModel,
    layout: "hf",
    pairs,
    source,
  };
}

/**
 * adapter_config.json as PEFT writes it for a LoRA adapter: every field its
 * LoraConfig reads, so PEFT loads it without warnings, with PEFT's defaults
 * for what this adapter does not use.
 */
export function peftConfigJson(adapter: LoraAdapter, baseModel = adapter.baseModel): string {
  if (adapter.layout !== "hf") {
    throw new InferenceError("INVALID_OPTION", `${adapter.source}: the adapter is in GGUF's q/k row order; convert it to the base's layout first`, {
      details: { file: adapter.source },
    });
  }
  const config = {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModel ?? null,
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: null,
    loftq_config: {},
    lora_alpha: adapter.alpha,
    lora_dropout: adapter.dropout,
    megatron_config: null,
    megatron_core: "megatron.core",
    modules_to_save: null,
    peft_type: "LORA",
    r: adapter.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...adapter.targetModules],
    task_type: "CAUSAL_LM",
    use_dora: false,
    use_rslora: adapter.useRslora,
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/** adapter_model.safetensors' tensors: PEFT's names, F32. */
export function peftTensors(adapter: LoraAdapter): SafetensorsTensorSpec[] {
  return adapter.pairs.flatMap((pair) => [
    { name: peftTensorName(pair.layer, pair.module, "A"), dtype: "F32" as const, shape: [pair.rank, pair.inFeatures], data: pair.a },
    { name: peftTensorName(pair.layer, pair.module, "B"), dtype: "F32" as const, shape: [pair.outFeatures, pair.rank], data: pair.b },
  ]);
}

/**
 * A PEFT folder's files by name, the weights first: written in this order, a folder whose
 * adapter_config.json exists has its weights too.
 */
export function peftFolderFiles(adapter: LoraAdapter, baseModel = adapter.baseModel): Record<string, Uint8Array> {
  const config = peftConfigJson(adapter, baseModel);
  return {
    // PEFT's own files carry this metadata: transformers reads "pt" as PyTorch tensors.
    [PEFT_WEIGHTS_FILE]: writeSafetensors(peftTensors(adapter), { format: "pt" }),
    [PEFT_CONFIG_FILE]: new TextEncoder().encode(config),
  };
}
