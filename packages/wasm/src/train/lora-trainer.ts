/**
 * LoRA training on a loaded Transformer: applyLoRA attaches adapters to the
 * chosen linears of every block (the forward adds them from then on), step
 * runs one forward + backward + AdamW update over a batch.
 */
import {
  defaultLoRAConfig,
  InferenceError,
  LORA_TARGET_MODULES,
  type LoRAConfig,
  Rng,
  type TrainBatch,
  type TrainingState,
  type TrainStepOptions,
  type TrainStepResult,
} from "@infer/core";
import type { WeightMatrix } from "../kernels/types.js";
import type { TrainableBlocks } from "../engine/block-weights.js";
import type { ModelConfig } from "../engine/config.js";
import type { LoraDeltas } from "../engine/lora.js";
import type { Transformer } from "../engine/transformer.js";
import { baseWeightName, inLayout, loraDeltas, peftFolderFiles, writePeftFolder, type LoraAdapter, type LoraModule } from "../lora/index.js";
import { ADAMW_DEFAULTS, type AdamWSettings, AdamWState } from "./adamw.js";
import { lossAndGradients, type AdaptedLinear, type TrainingGraph } from "./llama-graph.js";
import { LoraLinear } from "./lora-linear.js";
import { packBatch } from "./pack-batch.js";

/** PEFT's module names to the block fields they adapt. */
const MODULE_FIELDS: Readonly<Record<(typeof LORA_TARGET_MODULES)[number], AdaptedLinear>> = {
  q_proj: "q",
  k_proj: "k",
  v_proj: "v",
  o_proj: "o",
  gate_proj: "gate",
  up_proj: "up",
  down_proj: "down",
};

/** The seed when LoRAConfig names none: training is reproducible by default. */
const DEFAULT_SEED = 0;

/** An adapter being trained: its matrices, optimizer state and step count. */
export class TrainedAdapter {
  readonly linears: LoraLinear[];
  readonly perBlock: Partial<Record<AdaptedLinear, LoraLinear>>[];
  readonly optimizer: AdamWState[];
  /** Draws dropout masks, seeded from the config. */
  readonly rng: Rng;
  /** Optimizer steps taken. */
  steps = 0;

  constructor(
    readonly config: LoRAConfig,
    private readonly trainable: TrainableBlocks,
    private readonly model: { config: ModelConfig; format: "gguf" | "safetensors"; baseModel?: string },
  ) {
    const seed = config.seed ?? DEFAULT_SEED;
    const init = new Rng(seed);
    this.rng = new Rng(seed + 1);
    this.linears = [];
    this.perBlock = trainable.blocks.map((block, layer) => {
      const adapters: Partial<Record<AdaptedLinear, LoraLinear>> = {};
      // PEFT's module order within a block, so one seed always gives the same matrices.
      for (const module of LORA_TARGET_MODULES) {
        if (!config.targetModules.includes(module)) continue;
        const field = MODULE_FIELDS[module];
        const w = block[field];
        const linear = new LoraLinear(layer, module, w.cols, w.rows, config.rank, config.alpha / config.rank, init);
        adapters[field] = linear;
        this.linears.push(linear);
      }
      return adapters;
    });
    this.optimizer = this.linears.flatMap((l) => [new AdamWState(l.a, l.gradA), new AdamWState(l.b, l.gradB)]);
  }

  /** Writes a PEFT folder (adapter_config.json, adapter_model.safetensors), q/k rows in Hugging Face order. */
  async save(dir: string): Promise<void> {
    await writePeftFolder(dir, this.peftAdapter());
  }

  /** The files save writes, by name. */
  peftFiles(): Record<string, Uint8Array> {
    return peftFolderFiles(this.peftAdapter());
  }

  /** The adapter's current values with q/k rows in Hugging Face order, as PEFT stores them. */
  private peftAdapter(): LoraAdapter {
    return inLayout(this.snapshot(), "hf", this.model.config.architecture, this.model.config);
  }

  /** The adapter's current values as a LoRA adapter of lora/, in the base's q/k row order. */
  snapshot(): LoraAdapter {
    return {
      ...this.config,
      targetModules: [...this.config.targetModules] as LoraModule[],
      useRslora: false,
      baseModel: this.model.baseModel,
      layout: this.model.format === "gguf" ? "gguf" : "hf",
      pairs: this.linears.map((l) => ({
        layer: l.layer,
        module: l.module as LoraModule,
        rank: l.rank,
        inFeatures: l.inFeatures,
        outFeatures: l.outFeatures,
        a: l.a.slice(),
        b: l.b.slice(),
      })),
      source: "the adapter in training",
    };
  }

  /** The deltas the forward adds (copies: the kernels may keep a matrix they have seen, so each update makes new ones). */
  deltas(): LoraDeltas {
    const matrices = new Map<string, WeightMatrix>();
    this.perBlock.forEach((adapters, i) => {
      for (const [field, linear] of Object.entries(adapters) as [AdaptedLinear, LoraLinear][]) {
        matrices.set(baseWeightName(i, linear.module as LoraModule), this.trainable.blocks[i]![field]);
      }
    });
    return loraDeltas(this.snapshot(), { config: this.model.config, format: this.model.format, matrices });
  }

  get totalParams(): number {
    return this.linears.reduce((sum, l) => sum + l.parameterCount, 0);
  }

  /** Parameters then moments, per matrix in adapter order, named as PEFT names the matrices. */
  stateTensors(): { name: string; values: Float64Array }[] {
    return this.linears.flatMap((l, i) => {
      const name = `layers.${l.layer}.${l.module}`;
      const [a, b] = [this.optimizer[2 * i]!, this.optimizer[2 * i + 1]!];
      return [
        { name: `${name}.lora_A`, values: Float64Array.from(l.a) },
        { name: `${name}.lora_B`, values: Float64Array.from(l.b) },
        ...a.moments().map((values, k) => ({ name: `${name}.lora_A.${k === 0 ? "exp_avg" : "exp_avg_sq"}`, values: values.slice() })),
        ...b.moments().map((values, k) => ({ name: `${name}.lora_B.${k === 0 ? "exp_avg" : "exp_avg_sq"}`, values: values.slice() })),
      ];
    });
  }

  restore(state: TrainingState): void {
    const mismatch = (what: string) =>
      new InferenceError("INVALID_OPTION", `the training state does not fit the applied adapter: ${what}`, { details: { option: "trainingState" } });
    const { config } = this;
    const same = state.config.rank === config.rank && state.config.alpha === config.alpha && state.config.dropout === config.dropout &&
      state.config.targetModules.length === config.targetModules.length && state.config.targetModules.every((m) => config.targetModules.includes(m));
    if (!same) throw mismatch(`its LoRA config (rank ${state.config.rank}, alpha ${state.config.alpha}, ${state.config.targetModules.join(",")}) differs`);
    const expected = this.stateTensors();
    if (expected.length !== state.tensors.length) throw mismatch(`${state.tensors.length} tensors for ${expected.length}`);
    expected.forEach((tensor, i) => {
      const saved = state.tensors[i]!;
      if (saved.name !== tensor.name || saved.values.length !== tensor.values.length) throw mismatch(`tensor ${i} is ${saved.name} [${saved.values.length}], not ${tensor.name} [${tensor.values.length}]`);
    });
    if (!Number.isInteger(state.steps) || state.steps < 0) throw mismatch(`step count ${state.steps}`);
    this.rng.restore(state.rng);
    this.steps = state.steps;
    this.linears.forEach((l, i) => {
      const at = 6 * i;
      l.a.set(state.tensors[at]!.values);
      l.b.set(state.tensors[at + 1]!.values);
      this.optimizer[2 * i]!.restoreMoments(state.tensors[at + 2]!.values, state.tensors[at + 3]!.values);
      this.optimizer[2 * i + 1]!.restoreMoments(state.tensors[at + 4]!.values, state.tensors[at + 5]!.values);
    });
  }
}

export class LoraTrainer {
  private adapter: TrainedAdapter | undefined;

  constructor(
    private readonly transformer: Transformer,
    /** The base's file format: a GGUF llama's q/k rows are permuted, and adapters follow its order. */
    private readonly format: "gguf" | "safetensors",
    /** The base as it was loaded (a path or a hub id): saved adapters name it in base_model_name_or_path, as PEFT's do. */
    private readonly baseModel?: string,
  ) {}

  /** The adapter applied last, if any. */
  get current(): TrainedAdapter | undefined {
    return this.adapter;
  }

  /** Attaches a fresh adapter (replacing any before it) and returns it. */
  apply(partial: Partial<LoRAConfig> = {}): TrainedAdapter {
    const trainable = this.trainable();
    const config = validateLoRAConfig({ ...defaultLoRAConfig(), ...partial }, this.transformer.config.architecture);
    const adapter = new TrainedAdapter(config, trainable, { config: this.transformer.config, format: this.format, baseModel: this.baseModel });
    this.adapter = adapter;
    this.transformer.lora = adapter.deltas();
    return adapter;
  }

  /** One AdamW step over the batch; the loss is that of the parameters before the update. */
  step(batch: TrainBatch, options: TrainStepOptions = {}): TrainStepResult {
    const adapter = this.adapter;
    if (!adapter) throw new InferenceError("NO_ADAPTER", "trainStep needs an adapter: call applyLoRA first");
    const settings = adamWSettings(options);
    const { maxGradNorm, microBatches = 1 } = options;
    if (maxGradNorm !== undefined && !(maxGradNorm > 0 && Number.isFinite(maxGradNorm))) throw invalid("maxGradNorm", `trainStep option maxGradNorm must be a positive number, got ${maxGradNorm}`, maxGradNorm);
    if (!Number.isInteger(microBatches) || microBatches < 1) throw invalid("microBatches", `trainStep option microBatches must be a positive integer, got ${microBatches}`, microBatches);
    const groups = splitBatch(batch, microBatches).map((group) => packBatch(group, this.transformer.config.vocabSize));
    const graph = { ...this.graph(adapter), checkpoint: options.gradientCheckpointing ?? activationBudget(this.transformer) };
    for (const linear of adapter.linears) {
      linear.gradA.fill(0);
      linear.gradB.fill(0);
    }
    // Each group adds the gradient of its own mean; rescaling the sum so far before and after
    // keeps it the gradient of the mean over every target seen, as one pass over the batch.
    let sum = 0;
    let count = 0;
    for (const group of groups) {
      const groupCount = group.targets.reduce((n, target) => n + (target >= 0 ? 1 : 0), 0);
      if (groupCount === 0) continue;
      if (count > 0) scaleGradients(adapter, count / groupCount);
      const part = lossAndGradients(graph, group, true);
      sum += part.sum;
      count += part.count;
      if (count !== groupCount) scaleGradients(adapter, groupCount / count);
    }
    const loss = sum / count;
    const stepNumber = adapter.steps + 1;
    const gradNorm = gradientNorm(adapter);
    if (!Number.isFinite(loss) || !Number.isFinite(gradNorm)) {
      throw new InferenceError(
        "TRAINING_DIVERGED",
        `training step ${stepNumber}: the ${Number.isFinite(loss) ? "gradients are" : `loss is ${loss}`} not finite; the adapter keeps its parameters from before this step`,
        { details: { step: stepNumber, loss } },
      );
    }
    if (maxGradNorm !== undefined && gradNorm > maxGradNorm) scaleGradients(adapter, maxGradNorm / (gradNorm + 1e-6));
    adapter.steps = stepNumber;
    for (const state of adapter.optimizer) state.update(stepNumber, settings);
    this.transformer.lora = adapter.deltas();
    return { loss, tokens: count, gradNorm };
  }

  /** The applied adapter's parameters, moments, step count and dropout generator. */
  state(): TrainingState {
    const adapter = this.requireAdapter();
    return {
      steps: adapter.steps,
      rng: adapter.rng.state(),
      config: { ...adapter.config, targetModules: [...adapter.config.targetModules] },
      tensors: adapter.stateTensors(),
    };
  }

  restore(state: TrainingState): void {
    const adapter = this.requireAdapter();
    adapter.restore(state);
    this.transformer.lora = adapter.deltas();
  }

  private requireAdapter(): TrainedAdapter {
    if (!this.adapter) throw new InferenceError("NO_ADAPTER", "a training state needs an adapter: call applyLoRA first");
    return this.adapter;
  }

  /** The mean loss of a batch with the current adapter (or none), no update and no dropout (as PEFT in eval mode). */
  loss(batch: TrainBatch): TrainStepResult {
    const packed = packBatch(batch, this.transformer.config.vocabSize);
    const { sum, count } = lossAndGradients({ ...this.graph(this.adapter), dropout: 0 }, packed, false);
    return { loss: sum / count, tokens: count };
  }

  private graph(adapter: TrainedAdapter | undefined): TrainingGraph {
    return trainingGraph(this.transformer, adapter);
  }

  private trainable(): TrainableBlocks {
    return trainableBlocks(this.transformer);
  }
}

/** The blocks of a model training covers; TRAINING_UNSUPPORTED for the others. */
function trainableBlocks(transformer: Transformer): TrainableBlocks {
  const { config, weights } = transformer;
  if (!weights.trainable || config.attentionSoftcap > 0 || config.finalLogitSoftcap > 0) {
    throw new InferenceError("TRAINING_UNSUPPORTED", `backend wasm cannot train ${config.architecture} models yet (llama, qwen2, qwen3 and gemma3 without soft-capping train)`, {
      details: { architecture: config.architecture },
    });
  }
  return weights.trainable;
}

/** The training graph of a model with an adapter (or none); `float64` runs it in double precision (reference kernels only). */
export function trainingGraph(transformer: Transformer, adapter: TrainedAdapter | undefined, float64 = false): TrainingGraph {
  const trainable = trainableBlocks(transformer);
  return {
    config: transformer.config,
    kernels: transformer.kernels,
    head: transformer.weights,
    blocks: trainable.blocks,
    ropeFrequencies: trainable.ropeFrequencies,
    adapters: adapter?.perBlock ?? [],
    dropout: adapter?.config.dropout ?? 0,
    rng: adapter?.rng ?? new Rng(DEFAULT_SEED),
    float64,
  };
}

/**
 * What a step keeps as activations when the caller leaves gradientCheckpointing
 * unset: the first blocks keep theirs, the later ones are recomputed in the
 * backward, each for a forward's matmuls (about a third of its share of a step).
 * Kept activations are bounded twice:
 * - by the weights' float32 bytes: at the batches training uses, a block's
 *   activations come to more than its weights (1.7 times an F32 base's at 1,024
 *   tokens of a SmolLM2-shaped model), so keeping all would make them most of a
 *   step's memory. Weights count as float32 whatever their stored encoding, so a
 *   quantized base keeps the blocks an F32 one does (counted as stored, a Q8_0
 *   base would recompute most of its blocks);
 * - by a share of all the blocks' activations: a model whose weights outweigh its
 *   activations (a large vocabulary's embedding, Qwen2.5-0.5B's: activations 0.63x
 *   its weights at 1,024 tokens) kept every block under the first bound and
 *   peaked at half of PyTorch's peak, the memory target's limit; at this share
 *   it peaks well under it, and the SmolLM2 shape, which the first bound already
 *   holds near this share, loses little speed (docs/performance.md).
 */
const KEPT_SHARE_OF_ACTIVATIONS = 0.6;

/** The budget of kept activations, given the bytes every block would keep. */
function activationBudget(transformer: Transformer): (allBlocksBytes: number) => number {
  const weightBytes = transformer.parameterCount * Float32Array.BYTES_PER_ELEMENT;
  return (allBlocksBytes) => Math.min(weightBytes, KEPT_SHARE_OF_ACTIVATIONS * allBlocksBytes);
}

/** The global L2 norm over every adapter gradient (NaN or Infinity when one is not finite). */
function gradientNorm(adapter: TrainedAdapter): number {
  let squares = 0;
  for (const linear of adapter.linears) {
    for (const grad of [linear.gradA, linear.gradB]) for (let i = 0; i < grad.length; i++) squares += grad[i]! * grad[i]!;
  }
  return Math.sqrt(squares);
}

function scaleGradients(adapter: TrainedAdapter, factor: number): void {
  for (const linear of adapter.linears) {
    for (const grad of [linear.gradA, linear.gradB]) for (let i = 0; i < grad.length; i++) grad[i] = grad[i]! * factor;
  }
}

/** The batch's examples in `groups` consecutive groups (fewer when it has fewer examples). */
function splitBatch(batch: TrainBatch, groups: number): TrainBatch[] {
  const inputIds = Array.isArray(batch?.inputIds) ? batch.inputIds : [];
  if (groups === 1 || inputIds.length <= 1) return [batch];
  const size = Math.ceil(inputIds.length / groups);
  const parts: TrainBatch[] = [];
  for (let from = 0; from < inputIds.length; from += size) {
    const part: TrainBatch = { inputIds: inputIds.slice(from, from + size) };
    if (batch.lossMask !== undefined) part.lossMask = Array.isArray(batch.lossMask) ? batch.lossMask.slice(from, from + size) : batch.lossMask;
    parts.push(part);
  }
  return parts;
}

function invalid(field: string, message: string, value: unknown): InferenceError {
  return new InferenceError("INVALID_OPTION", message, { details: { option: field, value } });
}

/** Checks every field; the returned config is a copy with its own target list. */
export function validateLoRAConfig(config: LoRAConfig, architecture: string): LoRAConfig {
  const { rank, alpha, dropout, targetModules, seed } = config;
  if (!Number.isInteger(rank) || rank <= 0) throw invalid("rank", `LoRA rank must be a positive integer, got ${rank}`, rank);
  if (typeof alpha !== "number" || !Number.isFinite(alpha) || alpha <= 0) throw invalid("alpha", `LoRA alpha must be a positive number, got ${alpha}`, alpha);
  if (typeof dropout !== "number" || !(dropout >= 0 && dropout < 1)) throw invalid("dropout", `LoRA dropout must be in [0, 1), got ${dropout}`, dropout);
  if (seed !== undefined && !Number.isSafeInteger(seed)) throw invalid("seed", `LoRA seed must be an integer, got ${seed}`, seed);
  if (!Array.isArray(targetModules) || targetModules.length === 0) {
    throw invalid("targetModules", "LoRA targetModules must name at least one module", targetModules);
  }
  for (const module of targetModules) {
    if (!(LORA_TARGET_MODULES as readonly unknown[]).includes(module)) {
      throw invalid(
        "targetModules",
        `target module ${String(module)} is not in the ${architecture} architecture (it has ${LORA_TARGET_MODULES.join(", ")})`,
        module,
      );
    }
  }
  return { ...config, targetModules: [...new Set(targetModules)] };
}

function adamWSettings(options: TrainStepOptions): AdamWSettings {
  const settings: AdamWSettings = {
    learningRate: options.learningRate ?? ADAMW_DEFAULTS.learningRate,
    beta1: options.betas?.[0] ?? ADAMW_DEFAULTS.beta1,
    beta2: options.betas?.[1] ?? ADAMW_DEFAULTS.beta2,
    eps: options.eps ?? ADAMW_DEFAULTS.eps,
    weightDecay: options.weightDecay ?? ADAMW_DEFAULTS.weightDecay,
  };
  const check = (field: string, value: number, ok: boolean) => {
    if (!Number.isFinite(value) || !ok) throw invalid(field, `trainStep option ${field} is out of range: ${value}`, value);
  };
  check("learningRate", settings.learningRate, settings.learningRate >= 0);
  check("betas", settings.beta1, settings.beta1 >= 0 && settings.beta1 < 1);
  check("betas", settings.beta2, settings.beta2 >= 0 && settings.beta2 < 1);
  check("eps", settings.eps, settings.eps >= 0);
  check("weightDecay", settings.weightDecay, settings.weightDecay >= 0);
  return settings;
}
