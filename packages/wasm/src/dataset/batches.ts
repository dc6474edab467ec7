/**
 * Examples into TrainBatch steps. Packing fills each batch with examples up
 * to a token budget, so short examples do not waste a step each; the trainer
 * keeps every example its own sequence (positions from 0, attention within
 * it), so packed examples never see each other.
 */
import type { TrainBatch } from "@infer/core";
import type { TrainingExample } from "./examples.js";
import { dataError } from "./records.js";

export interface BatchOptions {
  /** Packing: at most this many tokens a batch (an example longer than it goes alone). */
  batchTokens?: number;
  /** Without packing: this many examples a batch (default 1). */
  batchSize?: number;
}

export interface DatasetStats {
  examples: number;
  /** Examples left out because nothing in them is learned (an empty completion after cutting, ...). */
  skipped: number;
  tokens: number;
  /** Targets the loss counts (lossMask 1 past each example's first position). */
  targets: number;
}

function targetsOf(example: TrainingExample): number {
  let count = 0;
  for (let t = 1; t < example.lossMask.length; t++) count += example.lossMask[t]!;
  return count;
}

export function toBatches(examples: readonly TrainingExample[], file: string, options: BatchOptions = {}): { batches: TrainBatch[]; stats: DatasetStats } {
  const { batchTokens, batchSize = 1 } = options;
  if (batchTokens !== undefined && !(Number.isInteger(batchTokens) && batchTokens > 0)) throw dataError(file, undefined, `batchTokens must be a positive integer (got ${batchTokens})`, "batchTokens");
  if (!(Number.isInteger(batchSize) && batchSize > 0)) throw dataError(file, undefined, `batchSize must be a positive integer (got ${batchSize})`, "batchSize");
  const kept = examples.filter((e) => targetsOf(e) > 0);
  if (kept.length === 0) throw dataError(file, undefined, "no example has a token to learn");
  const batches: TrainBatch[] = [];
  let current: TrainingExample[] = [];
  let tokens = 0;
  const flush = () => {
    if (current.length === 0) return;
    batches.push({ inputIds: current.map((e) => e.inputIds), lossMask: current.map((e) => e.lossMask) });
    current = [];
    tokens = 0;
  };
  for (const example of kept) {
    const full = batchTokens === undefined ? current.length >= batchSize : tokens + example.inputIds.length > batchTokens;
    if (full) flush();
    current.push(example);
    tokens += example.inputIds.length;
  }
  flush();
  const stats: DatasetStats = {
    examples: kept.length,
    skipped: examples.length - kept.length,
    tokens: kept.reduce((sum, e) => sum + e.inputIds.length, 0),
    targets: kept.reduce((sum, e) => sum + targetsOf(e), 0),
  };
  return { batches, stats };
}
