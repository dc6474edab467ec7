/**
 * The training loop over any TrainableModel: epochs of seeded-shuffled
 * examples in batches, gradient accumulation, a warmup + cosine learning rate,
 * gradient clipping, eval loss on held-out examples, `training` probe events,
 * checkpoints that resume bit-identically, and an AbortSignal that stops
 * between steps. Backends provide only trainStep/evaluateLoss and their state.
 *
 * The data order of step s is a pure function of the seed and s (epoch e is
 * shuffled by Rng(seed + e)), so a checkpoint needs only the model's training
 * state and the step count to continue exactly where it stopped.
 */
import { InferenceError, isInferenceError } from "./errors.js";
import { emitTrainingStep, ProbeBus, type ProbeSink } from "./probes.js";
import { Rng } from "./sampling.js";
import type { TrainableModel, TrainBatch, TrainingState, TrainStepOptions } from "./training.js";

/** One training sequence: token ids and, optionally, which positions are learned (TrainBatch's meaning). */
export interface TrainExample {
  inputIds: number[];
  lossMask?: number[];
}

/** A loop's position and what it has seen: the trainer's half of a checkpoint. */
export interface TrainerState {
  /** Optimizer steps taken. */
  step: number;
  /** Fingerprint of the options that fix the data order and schedule; a resume with others is refused. */
  plan: TrainPlan;
  history: TrainHistoryEntry[];
}

export interface TrainHistoryEntry {
  step: number;
  loss: number;
  evalLoss?: number;
}

export interface TrainPlan {
  examples: number;
  totalSteps: number;
  batchSize: number;
  gradientAccumulation: number;
  seed: number;
  shuffle: boolean;
}

export interface TrainCheckpoint {
  trainer: TrainerState;
  model: TrainingState;
}

/** Where checkpoints go; `save` must replace the previous one atomically (a crash leaves either the old or the new). */
export interface CheckpointStore {
  save(checkpoint: TrainCheckpoint): Promise<void>;
  /** The last checkpoint saved, if any. */
  load(): Promise<TrainCheckpoint | undefined>;
}

export interface TrainProgress extends TrainHistoryEntry {
  totalSteps: number;
  epoch: number;
  learningRate: number;
  gradNorm: number;
  tokens: number;
  tokensPerSecond: number;
  /** Seconds the run's steps so far took (since this call began). */
  elapsedSeconds: number;
  /** Estimated seconds to the last step at this call's pace. */
  etaSeconds: number;
}

export interface TrainOptions {
  /** Passes over the examples (default 1). */
  epochs?: number;
  /** Examples a micro-batch (default 1). */
  batchSize?: number;
  /** Micro-batches an optimizer step (default 1): a step sees batchSize × gradientAccumulation examples. */
  gradientAccumulation?: number;
  /** Peak learning rate (default 2e-4). */
  learningRate?: number;
  /** Steps of linear warmup from 0 (default 0). */
  warmupSteps?: number;
  /** After warmup: "cosine" decays to 0 at the last step (as Hugging Face's cosine schedule), "constant" keeps it (default "cosine"). */
  schedule?: "cosine" | "constant";
  /** Clips the global gradient norm to this (default 1, as Hugging Face's Trainer); 0 turns clipping off. */
  maxGradNorm?: number;
  /** Seeds the shuffling (default 0). */
  seed?: number;
  /** Shuffle each epoch's examples (default true). */
  shuffle?: boolean;
  /** AdamW and memory settings passed to every step. */
  step?: Pick<TrainStepOptions, "betas" | "eps" | "weightDecay" | "gradientCheckpointing">;
  /** Held-out examples: their mean loss every `evalEvery` steps and after the last. */
  evalExamples?: TrainExample[];
  /** Default: only after the last step. */
  evalEvery?: number;
  /** Saves a checkpoint every this many steps and after the last (needs `checkpoints`). */
  checkpointEvery?: number;
  checkpoints?: CheckpointStore;
  /** Continue from the store's last checkpoint when there is one. */
  resume?: boolean;
  /** Stops after the step in progress (a checkpoint is written then when a store is given). */
  signal?: AbortSignal;
  /** Receive one `training` event a step (phase "training"). */
  probes?: ProbeSink | ProbeSink[];
  /** Called after every step (and its eval, when one ran). */
  onStep?: (progress: TrainProgress) => void;
}

export interface TrainResult {
  /** Optimizer steps taken in all (this call's and the resumed checkpoint's). */
  steps: number;
  totalSteps: number;
  /** The step this call resumed from (0 for a fresh run). */
  resumedFrom: number;
  /** True when the signal stopped the run before its last step. */
  aborted: boolean;
  history: TrainHistoryEntry[];
  finalLoss?: number;
  finalEvalLoss?: number;
}

function invalid(option: string, message: string, value: unknown): InferenceError {
  return new InferenceError("INVALID_OPTION", message, { details: { option, value } });
}

function positiveInteger(option: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw invalid(option, `train option ${option} must be a positive integer, got ${value}`, value);
  return value;
}

function checkExamples(option: string, examples: unknown): TrainExample[] {
  if (!Array.isArray(examples) || examples.length === 0) {
    throw invalid(option, `train needs at least one example in ${option}: the dataset is empty`, Array.isArray(examples) ? examples.length : examples);
  }
  examples.forEach((example: Partial<TrainExample> | undefined, i) => {
    if (!Array.isArray(example?.inputIds) || example.inputIds.length < 2) {
      throw invalid(option, `${option}[${i}] needs inputIds with at least two tokens (one target)`, i);
    }
  });
  return examples as TrainExample[];
}

/** The learning rate of step `step` (0-based), as Hugging Face's get_cosine_schedule_with_warmup. */
export function scheduledLearningRate(step: number, totalSteps: number, peak: number, warmupSteps: number, schedule: "cosine" | "constant"): number {
  if (step < warmupSteps) return (peak * step) / Math.max(1, warmupSteps);
  if (schedule === "constant") return peak;
  const progress = (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps);
  return peak * Math.max(0, 0.5 * (1 + Math.cos(Math.PI * progress)));
}

/** Optimizer steps of a run over `examples` examples: every epoch ends with a step on what is left. */
export function totalTrainSteps(examples: number, options: Pick<TrainOptions, "epochs" | "batchSize" | "gradientAccumulation"> = {}): number {
  return (options.epochs ?? 1) * Math.ceil(examples / ((options.batchSize ?? 1) * (options.gradientAccumulation ?? 1)));
}

/** Fisher-Yates over 0 .. n - 1 with a seeded generator. */
function shuffled(n: number, rng: Rng | undefined): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  if (!rng) return order;
  for (let i = n - 1; i > 0; i--) {
    const j = rng.nextUint32() % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

function toBatch(examples: readonly TrainExample[]): TrainBatch {
  const batch: TrainBatch = { inputIds: examples.map((e) => e.inputIds) };
  if (examples.some((e) => e.lossMask !== undefined)) batch.lossMask = examples.map((e) => e.lossMask ?? e.inputIds.map(() => 1));
  return batch;
}

function samePlan(a: TrainPlan, b: TrainPlan): boolean {
  return (Object.keys(a) as (keyof TrainPlan)[]).every((key) => a[key] === b[key]);
}

/** The token-weighted mean loss of examples, `batchSize` at a time. */
export async function evaluateExamples(model: TrainableModel, examples: readonly TrainExample[], batchSize = 1): Promise<number> {
  let sum = 0;
  let count = 0;
  for (let from = 0; from < examples.length; from += batchSize) {
    const { loss, tokens } = await model.evaluateLoss(toBatch(examples.slice(from, from + batchSize)));
    sum += loss * tokens;
    count += tokens;
  }
  return sum / count;
}

/**
 * Trains the model's applied adapter (call applyLoRA first) on the examples.
 * Resolves when the last step ran or the signal stopped it; a diverging step
 * fails with TRAINING_DIVERGED naming it, the last checkpoint untouched.
 */
export async function train(model: TrainableModel, examples: TrainExample[], options: TrainOptions = {}): Promise<TrainResult> {
  const data = checkExamples("examples", examples);
  const evalData = options.evalExamples === undefined ? undefined : checkExamples("evalExamples", options.evalExamples);
  const epochs = positiveInteger("epochs", options.epochs ?? 1);
  const batchSize = positiveInteger("batchSize", options.batchSize ?? 1);
  const gradientAccumulation = positiveInteger("gradientAccumulation", options.gradientAccumulation ?? 1);
  const learningRate = options.learningRate ?? 2e-4;
  if (!(learningRate >= 0 && Number.isFinite(learningRate))) throw invalid("learningRate", `train option learningRate must be a non-negative number, got ${learningRate}`, learningRate);
  const warmupSteps = options.warmupSteps ?? 0;
  if (!Number.isInteger(warmupSteps) || warmupSteps < 0) throw invalid("warmupSteps", `train option warmupSteps must be a non-negative integer, got ${warmupSteps}`, warmupSteps);
  const schedule = options.schedule ?? "cosine";
  if (schedule !== "cosine" && schedule !== "constant") throw invalid("schedule", `train option schedule must be "cosine" or "constant", got ${String(schedule)}`, schedule);
  const maxGradNorm = options.maxGradNorm ?? 1;
  if (!(maxGradNorm >= 0 && Number.isFinite(maxGradNorm))) throw invalid("maxGradNorm", `train option maxGradNorm must be a non-negative number, got ${maxGradNorm}`, maxGradNorm);
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed)) throw invalid("seed", `train option seed must be an integer, got ${seed}`, seed);
  const evalEvery = options.evalEvery === undefined ? undefined : positiveInteger("evalEvery", options.evalEvery);
  const checkpointEvery = options.checkpointEvery === undefined ? undefined : positiveInteger("checkpointEvery", options.checkpointEvery);
  const store = options.checkpoints;
  if ((checkpointEvery !== undefined || options.resume) && !store) throw invalid("checkpoints", "checkpointEvery and resume need a checkpoint store", undefined);

  const perStep = batchSize * gradientAccumulation;
  const stepsPerEpoch = totalTrainSteps(data.length, { batchSize, gradientAccumulation });
  const plan: TrainPlan = {
    examples: data.length,
    totalSteps: totalTrainSteps(data.length, { epochs, batchSize, gradientAccumulation }),
    batchSize,
    gradientAccumulation,
    seed,
    shuffle: options.shuffle !== false,
  };
  let history: TrainHistoryEntry[] = [];
  let step = 0;
  if (options.resume && store) {
    const checkpoint = await store.load();
    if (checkpoint) {
      if (!samePlan(checkpoint.trainer.plan, plan)) {
        throw invalid("resume", `the checkpoint was made with other data or options (${JSON.stringify(checkpoint.trainer.plan)}; now ${JSON.stringify(plan)})`, checkpoint.trainer.plan);
      }
      model.restoreTrainingState(checkpoint.model);
      step = checkpoint.trainer.step;
      history = [...checkpoint.trainer.history];
    }
  }
  const resumedFrom = step;
  const save = async () => {
    if (store) await store.save({ trainer: { step, plan, history }, model: model.trainingState() });
  };
  const bus = new ProbeBus(options.probes);
  const call = bus.call();
  const started = performance.now();
  let epochOrder: { epoch: number; order: number[] } | undefined;
  let aborted = false;

  while (step < plan.totalSteps) {
    if (options.signal?.aborted) {
      aborted = true;
      break;
    }
    const epoch = Math.floor(step / stepsPerEpoch);
    if (epochOrder?.epoch !== epoch) epochOrder = { epoch, order: shuffled(data.length, plan.shuffle ? new Rng(seed + epoch) : undefined) };
    const from = (step - epoch * stepsPerEpoch) * perStep;
    const batch = toBatch(epochOrder.order.slice(from, from + perStep).map((i) => data[i]!));
    const rate = scheduledLearningRate(step, plan.totalSteps, learningRate, warmupSteps, schedule);
    const stepStarted = performance.now();
    const result = await model
      .trainStep(batch, {
        ...options.step,
        learningRate: rate,
        microBatches: Math.min(gradientAccumulation, batch.inputIds.length),
        ...(maxGradNorm > 0 ? { maxGradNorm } : {}),
      })
      .catch((error: unknown) => {
        if (!isInferenceError(error, "TRAINING_DIVERGED")) throw error;
        const kept = store ? "; the last checkpoint is kept" : "";
        throw new InferenceError("TRAINING_DIVERGED", `training diverged at step ${step + 1} of ${plan.totalSteps}: ${error.message.replace(/^training step \d+: /, "")}${kept}`, {
          cause: error,
          details: { ...error.details, step: step + 1 },
        });
      });
    step++;
    const seconds = (performance.now() - stepStarted) / 1000;
    const entry: TrainHistoryEntry = { step, loss: result.loss };
    const lastStep = step === plan.totalSteps;
    if (evalData && (lastStep || (evalEvery !== undefined && step % evalEvery === 0))) {
      entry.evalLoss = await evaluateExamples(model, evalData, batchSize);
    }
    history.push(entry);
    const tokensPerSecond = seconds > 0 ? result.tokens / seconds : 0;
    const gradNorm = result.gradNorm ?? Number.NaN;
    emitTrainingStep(call, step - resumedFrom - 1, { step, loss: result.loss, learningRate: rate, gradNorm, tokensPerSecond });
    const elapsedSeconds = (performance.now() - started) / 1000;
    options.onStep?.({
      ...entry,
      totalSteps: plan.totalSteps,
      epoch,
      learningRate: rate,
      gradNorm,
      tokens: result.tokens,
      tokensPerSecond,
      elapsedSeconds,
      etaSeconds: (elapsedSeconds / (step - resumedFrom)) * (plan.totalSteps - step),
    });
    const stopping = options.signal?.aborted === true;
    if (checkpointEvery !== undefined && (lastStep || stopping || step % checkpointEvery === 0)) await save();
  }
  const last = history[history.length - 1];
  const finalEval = [...history].reverse().find((h) => h.evalLoss !== undefined)?.evalLoss;
  return {
    steps: step,
    totalSteps: plan.totalSteps,
    resumedFrom,
    aborted,
    history,
    ...(last ? { finalLoss: last.loss } : {}),
    ...(finalEval !== undefined ? { finalEvalLoss: finalEval } : {}),
  };
}
