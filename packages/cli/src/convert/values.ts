import { InferenceError, parseModelJson } from "@infer/core";
import { GgufValueType, type GgufValueInput } from "@infer/formats";

export type MetadataValue = GgufValueInput;
export type Metadata = Record<string, MetadataValue>;

/** Explicit GGUF types where inference from a JS number would guess wrong (10000.0 is an integer to JS). */
export const f32 = (value: number): MetadataValue => ({ type: GgufValueType.FLOAT32, value });
export const u32 = (value: number): MetadataValue => ({ type: GgufValueType.UINT32, value });

export function readJsonObject(text: string, file: string): Record<string, unknown> {
  const parsed = parseModelJson(text, file);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new InferenceError("MODEL_FORMAT", `${file} is not a JSON object`, { details: { file } });
  }
  return parsed as Record<string, unknown>;
}
