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
  /**
   * The files `save` writes, by name, as bytes: for runtimes without a file system (a page
   * offers them as downloads, writes them to the Origin Private File System or uploads them).
   */
  peftFiles(): Promise<Record<string, Uint8Array>>;
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
   * about a second forward pass of time. The results are the same. true: every
   * layer; false: none; default: the backend's choice (wasm keeps the first
   * layers' activations up to the weights' size in float32 and recomputes the rest).
   */
  gradientCheckpointing?: boolean;
  /** Scales the gradients down to this global L2 norm when above it, as torch.nn.utils.clip_grad_norm_; default: no clipping. */
  maxGradNorm?: number;
  /**
   * Gradient accumulation: the batch's examples run in this many consecutive
   * groups, each group's activations freed before the next, and their
   * gradients combine into the gradient of the whole batch's mean loss
   * (one optimizer update). Default 1.
   */
  microBatches?: number;
  signal?: AbortSignal;
}

export interface TrainStepResult {
  /** Mean next-token cross-entropy over the batch's counted targets, before this step's update. */
  loss: number;
  /** Targets counted in the loss. */
  tokens: number;
  /** The gradients' global L2 norm before clipping (absent where a result has no gradient, as an evaluation). */
  gradNorm?: number;
}

/**
 * Everything a step depends on besides the data: the adapter's matrices, the
 * optimizer's moments, the step count and the dropout generator. Restoring it
 * makes the next steps the ones the saving model would have taken.
 */
export interface TrainingState {
  steps: number;
  /** The dropout generator's state (Rng.state()). */
  rng: number[];
  /** The adapter's config, so a state restores only onto a matching adapter. */
  config: LoRAConfig;
  /** Named tensors, in a fixed order the backend restores them from; float64 holds float32 values exactly. */
  tensors: { name: string; values: Float64Array }[];
}

export interface TrainableModel extends TextModel {
  readonly numLayers: number;
  applyLoRA(config?: Partial<LoRAConfig>): Adapter;
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** One forward + backward + AdamW update of the adapter's parameters (NO_ADAPTER before applyLoRA). */
  trainStep(batch: TrainBatch, options?: TrainStepOptions): Promise<TrainStepResult>;
  /** The mean next-token loss of a batch under the current adapter (or the base alone): no update, no dropout. */
  evaluateLoss(batch: TrainBatch, options?: { signal?: AbortSignal }): Promise<TrainStepResult>;
  /** The applied adapter's training state (NO_ADAPTER before applyLoRA). */
  trainingState(): TrainingState;
  /** Puts a saved state back into the applied adapter, whose config must match (INVALID_OPTION otherwise). */
  restoreTrainingState(state: TrainingState): void;
}

export function isTrainableModel(model: TextModel): model is TrainableModel {
  return hasMethods(model, ["applyLoRA", "encode", "decode", "trainStep", "evaluateLoss", "trainingState", "restoreTrainingState"]);
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
