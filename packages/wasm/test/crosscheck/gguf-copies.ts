import { dequantize, GgmlType, type GgufTensorSpec, type GgufValueInput } from "@infer/formats";
import { readGguf, writeGgufFile } from "@infer/formats/node";
/**
 * A copy of a GGUF file for llama.cpp, made with our own reader and writer,
 * that stores every quantized or half-precision tensor as the F32 values our
 * dequantizer reads from it. llama.cpp then runs the same weights in float
 * arithmetic, which separates "same weights" from "same arithmetic" when a
 * quantized file's logits differ. Metadata can be changed on the way (the
 * sensitivity tests alter a model on purpose).
 */

export interface CopyOptions {
  /** Store quantized and half-precision tensors as the F32 values they decode to. */
  dequantize: boolean;
  /** Metadata to set in the copy (the sensitivity tests alter a model on purpose). */
  metadata?: Record<string, GgufValueInput>;
  /** Rewrites an F32 tensor's values (after dequantizing), e.g. to round them as another file stores them. */
  mapValues?: (name: string, values: Float32Array) => Float32Array;
}

export async function writeLlamaCppCopy(source: string, target: string, options: CopyOptions): Promise<string> {
  const file = await readGguf(source);
  const metadata = new Map<string, GgufValueInput>(file.metadata);
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  const tensors: GgufTensorSpec[] = file.tensors.map((info) => {
    const bytes = file.tensorData(info);
    const keep = info.type === GgmlType.F32 ? !options.mapValues : !options.dequantize;
    if (keep) return { name: info.name, shape: info.shape, type: info.type, data: bytes };
    const count = info.shape.reduce((product, size) => product * size, 1);
    const values = dequantize(info.type, bytes, count);
    return { name: info.name, shape: info.shape, type: GgmlType.F32, data: options.mapValues?.(info.name, values) ?? values };
  });
  await writeGgufFile(target, { metadata, tensors, alignment: file.alignment });
  return target;
}
