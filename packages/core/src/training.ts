import { InferenceError } from "./errors.js";
import { hasMethods, type TextModel } from "./model.js";
import type { LoadOptions } from "./options.js";
import { loadModel } from "./registry.js";

/** LoRA settings, named as in PEFT's adapter_config.json. */
export interface LoRAConfig {
  rank: number;
  alpha: number;
  /** Projection names the adapters attach to ("q_proj", "v_proj", ...). */
  targetModules: string[];
  dropout: number;
}

export function defaultLoRAConfig(): LoRAConfig {
  return { rank: 8, alpha: 16, targetModules: ["q_proj", "v_proj"], dropout: 0 };
}

/** A trained LoRA adapter. */
export interface Adapter {
  /** Trainable parameters across all adapter matrices. */
  readonly totalParams: number;
  /** Writes a PEFT folder: adapter_config.json + adapter_model.safetensors. */
  save(dir: string): Promise<void>;
}

export interface TrainBatch {
  /** Token ids per example. */
  inputIds: number[][];
  /** Per-position loss mask (1 = learn this target); default: every position. */
  lossMask?: number[][];
}

export interface TrainStepOptions {
  learningRate?: number;
  signal?: AbortSignal;
}

export interface TrainableModel extends TextModel {
  readonly numLayers: number;
  applyLoRA(config?: Partial<LoRAConfig>): Adapter;
  encode(text: string): number[];
  decode(ids: number[]): string;
  trainStep(batch: TrainBatch, options?: TrainStepOptions): Promise<{ loss: number }>;
}

export function isTrainableModel(model: TextModel): model is TrainableModel {
  return hasMethods(model, ["applyLoRA", "encode", "decode", "trainStep"]);
}

/**
 * Loads a model for LoRA training. When the chosen backend cannot train, the
 * model is closed and the call fails with `TRAINING_UNSUPPORTED`.
 */
export async function loadTrainable(path: string, options?: LoadOptions): Promise<TrainableModel> {
  const model = await loadModel(path, options);
  if (isTrainableModel(model)) return model;
  await model.close();
  throw new InferenceError("TRAINING_UNSUPPORTED", `backend ${model.backend} does not support training`, {
    details: { backend: model.backend, path },
  });
}
