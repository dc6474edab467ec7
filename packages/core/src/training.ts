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
  /** Seeds the initial A matrices and the dropout masks: the same seed and data give the same adapter. */
  seed?: number;
}

export function defaultLoRAConfig(): LoRAConfig {
  return { rank: 8, alpha: 16, targetModules: ["q_proj", "v_proj"], dropout: 0 };
}

/** The projection names `LoRAConfig.targetModules` may hold (PEFT's names for the llama-family linears). */
export const LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] as const;

/** A trained LoRA adapter. */
export interface Adapter {
  /** The settings it was made with (defaults filled in). */
  readonly config: LoRAConfig;
  /** Trainable parameters across all adapter matrices. */
  readonly totalParams: number;
  /** Writes a PEFT folder: adapter_config.json + adapter_model.safetensors. */
  save(dir: string): Promise<void>;
}

/**
 * Examples of one optimizer step. As Hugging Face `labels`: position t >= 1 of
 * an example is a target predicted from positions 0 .. t - 1.
 */
export interface TrainBatch {
  /** Token ids per example. */
  inputIds: number[][];
  /** Per-position loss mask, shaped as inputIds (0 drops the target at that position); default: every position. */
  lossMask?: number[][];
}

/** AdamW, as PyTorch's torch.optim.AdamW. */
export interface TrainStepOptions {
  /** Default 1e-4. */
  learningRate?: number;
  /** Default [0.9, 0.999]. */
  betas?: [number, number];
  /** Default 1e-8. */
  eps?: number;
  /** Decoupled weight decay; default 0. */
  weightDecay?: number;
  /**
   * Recompute each layer's activations in the backward instead of keeping
   * them all from the forward: memory for one layer's activations, for
   * about a second forward pass of time. The results are the same. Default false.
   */
  gradientCheckpointing?: boolean;
  signal?: AbortSignal;
}

export interface TrainStepResult {
  /** Mean next-token cross-entropy over the batch's counted targets, before this step's update. */
  loss: number;
  /** Targets counted in the loss. */
  tokens: number;
}

export interface TrainableModel extends TextModel {
  readonly numLayers: number;
  applyLoRA(config?: Partial<LoRAConfig>): Adapter;
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** One forward + backward + AdamW update of the adapter's parameters (NO_ADAPTER before applyLoRA). */
  trainStep(batch: TrainBatch, options?: TrainStepOptions): Promise<TrainStepResult>;
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
