/** A JSONL training file from disk (where the runtime has one). */
import { InferenceError, type TrainBatch } from "@infer/core";
import { platform } from "#platform";
import type { DatasetStats } from "./batches.js";
import type { ExampleTokenizer } from "./examples.js";
import { jsonlBatches, type DatasetOptions } from "./index.js";

export async function readJsonlDataset(
  path: string,
  tokenizer: ExampleTokenizer,
  options: DatasetOptions = {},
): Promise<{ batches: TrainBatch[]; stats: DatasetStats }> {
  const text = await platform.files.readTextStream(path).catch((error: unknown) => {
    throw new InferenceError("MODEL_NOT_FOUND", `no training data at '${path}'`, { cause: error, details: { option: "data", file: path } });
  });
  return jsonlBatches(text, path, tokenizer, options);
}
