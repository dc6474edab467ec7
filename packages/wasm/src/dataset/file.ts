/** A JSONL training file from disk (Node). */
import { readFile } from "node:fs/promises";
import { InferenceError, type TrainBatch } from "@infer/core";
import type { DatasetStats } from "./batches.js";
import type { ExampleTokenizer } from "./examples.js";
import { jsonlBatches, type DatasetOptions } from "./index.js";

export async function readJsonlDataset(
  path: string,
  tokenizer: ExampleTokenizer,
  options: DatasetOptions = {},
): Promise<{ batches: TrainBatch[]; stats: DatasetStats }> {
  const text = await readFile(path, "utf8").catch((error: unknown) => {
    throw new InferenceError("MODEL_NOT_FOUND", `no training data at '${path}'`, { cause: error, details: { option: "data", file: path } });
  });
  return jsonlBatches(text, path, tokenizer, options);
}
