import { InferenceError } from "@infer/core";

/** A file llama.cpp must not read: MODEL_FORMAT naming the file and the field. */
export function formatError(file: string, field: string, problem: string): InferenceError {
  return new InferenceError("MODEL_FORMAT", `${file}: ${field} ${problem}`, { details: { file, field } });
}
