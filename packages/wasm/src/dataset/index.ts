// Training data: JSONL records to examples (token ids + loss masks) to TrainBatch steps.
import type { TrainBatch } from "@infer/core";
import { toBatches, type BatchOptions, type DatasetStats } from "./batches.js";
import { toExample, type ExampleOptions, type ExampleTokenizer, type TrainingExample } from "./examples.js";
import { parseJsonl } from "./records.js";

export { toBatches, type BatchOptions, type DatasetStats } from "./batches.js";
export { toExample, type ExampleOptions, type ExampleTokenizer, type TrainingExample } from "./examples.js";
export { dataError, parseJsonl, type DataRecord } from "./records.js";

export interface DatasetOptions extends ExampleOptions, BatchOptions {}

/** A JSONL text's examples, tokenized; `file` names it in errors. */
export function jsonlExamples(text: string, file: string, tokenizer: ExampleTokenizer, options: ExampleOptions = {}): TrainingExample[] {
  return parseJsonl(text, file).map((record) => toExample(record, tokenizer, file, options));
}

/** A JSONL text as the batches of one epoch, in file order (shuffling is the trainer's, seeded). */
export function jsonlBatches(
  text: string,
  file: string,
  tokenizer: ExampleTokenizer,
  options: DatasetOptions = {},
): { batches: TrainBatch[]; stats: DatasetStats } {
  return toBatches(jsonlExamples(text, file, tokenizer, options), file, options);
}
