/**
 * GGUF file types: llama.cpp's `llama_ftype`, stored as `general.file_type`,
 * says what a file's weights mostly are; and, for files that do not say, the
 * same description taken from the tensor types.
 */
import { findTypeInfo } from "./ggml-types.js";

/** A quantization as a model is described by it. */
export interface QuantDescription {
  /** Nominal bits per weight of the dominant weight type. */
  bits: number;
  /** Quantization block size; 0 for plain floating point. */
  group: number;
}

export interface GgufFileType extends QuantDescription {
  /** llama.cpp's name for it (the LLAMA_FTYPE_MOSTLY_ suffix), as quantized files are named. */
  name: string;
}

const fileType = (name: string, bits: number, group: number): GgufFileType => ({ name, bits, group });

/** `general.file_type` values, by id (ids llama.cpp retired are absent). */
export const GGUF_FILE_TYPES: Readonly<Record<number, GgufFileType>> = {
  0: fileType("F32", 32, 0),
  1: fileType("F16", 16, 0),
  2: fileType("Q4_0", 4, 32),
  3: fileType("Q4_1", 4, 32),
  7: fileType("Q8_0", 8, 32),
  8: fileType("Q5_0", 5, 32),
  9: fileType("Q5_1", 5, 32),
  10: fileType("Q2_K", 2, 256),
  11: fileType("Q3_K_S", 3, 256),
  12: fileType("Q3_K_M", 3, 256),
  13: fileType("Q3_K_L", 3, 256),
  14: fileType("Q4_K_S", 4, 256),
  15: fileType("Q4_K_M", 4, 256),
  16: fileType("Q5_K_S", 5, 256),
  17: fileType("Q5_K_M", 5, 256),
  18: fileType("Q6_K", 6, 256),
  19: fileType("IQ2_XXS", 2, 256),
  20: fileType("IQ2_XS", 2, 256),
  21: fileType("Q2_K_S", 2, 256),
  22: fileType("IQ3_XS", 3, 256),
  23: fileType("IQ3_XXS", 3, 256),
  24: fileType("IQ1_S", 1, 256),
  25: fileType("IQ4_NL", 4, 32),
  26: fileType("IQ3_S", 3, 256),
  27: fileType("IQ3_M", 3, 256),
  28: fileType("IQ2_S", 2, 256),
  29: fileType("IQ2_M", 2, 256),
  30: fileType("IQ4_XS", 4, 256),
  31: fileType("IQ1_M", 1, 256),
  32: fileType("BF16", 16, 0),
  36: fileType("TQ1_0", 1, 256),
  37: fileType("TQ2_0", 2, 256),
  38: fileType("MXFP4_MOE", 4, 32),
};

/** The `general.file_type` id llama.cpp names `name` ("Q8_0", "Q4_K_M"); undefined for names it does not use. */
export function fileTypeId(name: string): number | undefined {
  const found = Object.entries(GGUF_FILE_TYPES).find(([, type]) => type.name === name);
  return found && Number(found[0]);
}

/** A tensor as far as describeQuantization needs it: its ggml type id and dimensions. */
export interface TensorSummary {
  ggmlType: number;
  dimensions: readonly (number | bigint)[];
}

/**
 * The quantization of a model: from `general.file_type` when the file states
 * it, otherwise from the tensor type holding the most weights ({ bits: 0,
 * group: 0 } when neither tells).
 */
export function describeQuantization(fileTypeId: unknown, tensors: readonly TensorSummary[] | undefined): QuantDescription {
  const stated = typeof fileTypeId === "number" ? GGUF_FILE_TYPES[fileTypeId] : undefined;
  if (stated) return { bits: stated.bits, group: stated.group };
  const weightsByType = new Map<number, number>();
  for (const tensor of tensors ?? []) {
    weightsByType.set(tensor.ggmlType, (weightsByType.get(tensor.ggmlType) ?? 0) + elementCount(tensor));
  }
  let dominant: number | undefined;
  for (const [type, count] of weightsByType) {
    if (dominant === undefined || count > weightsByType.get(dominant)!) dominant = type;
  }
  return (dominant !== undefined && describeTensorType(dominant)) || { bits: 0, group: 0 };
}

/** The quantization a ggml tensor type stands for; undefined for ids not in the table. */
export function describeTensorType(type: number): QuantDescription | undefined {
  const info = findTypeInfo(type);
  return info && { bits: info.bits, group: info.blockSize === 1 ? 0 : info.blockSize };
}

/** Elements of a tensor: the product of its dimensions. */
export function elementCount(tensor: TensorSummary): number {
  return tensor.dimensions.reduce<number>((product, dim) => product * Number(dim), 1);
}
