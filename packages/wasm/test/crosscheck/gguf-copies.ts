/**
 * Copies of a GGUF file for llama.cpp, made with our own reader and writer:
 *
 * - llama.cpp sets special-token attributes by model name: a general.name
 *   containing "phi3" or "phi-3" makes it look up "</s>", "<unk>", "<s>" and
 *   "<|endoftext|>" by text (llama-vocab.cpp), and a vocabulary without them
 *   (our byte-level test vocabulary) fails to load with std::out_of_range
 *   ("_Map_base::at"). The copy renames the model; nothing it computes
 *   depends on the name.
 * - The dequantized copy stores every quantized or half-precision tensor as
 *   the F32 values our dequantizer reads from it. llama.cpp then runs the same
 *   weights in float arithmetic, which separates "same weights" from "same
 *   arithmetic" when a quantized file's logits differ.
 */
import { dequantize, GgmlType, GgufValueType, readGguf, writeGgufFile } from "../../src/formats/index.js";
import type { GgufFile, GgufTensorSpec, GgufValueInput } from "../../src/formats/index.js";

/** Model names llama.cpp keys per-token attributes on (llama-vocab.cpp, "Handle per token attributes"). */
const NAME_QUIRKS = /phi-?3/gi;

function quirkyName(file: GgufFile): string | undefined {
  const name = file.metadata.get("general.name");
  return name?.type === GgufValueType.STRING && new RegExp(NAME_QUIRKS.source, "i").test(name.value) ? name.value : undefined;
}

/** `source` itself when llama.cpp takes it as written, else a renamed copy at `target`. */
export async function llamaCppReadable(source: string, target: string): Promise<string> {
  return quirkyName(await readGguf(source)) === undefined ? source : writeLlamaCppCopy(source, target, { dequantize: false });
}

export interface CopyOptions {
  /** Store quantized and half-precision tensors as the F32 values they decode to. */
  dequantize: boolean;
  /** Metadata to set in the copy (the sensitivity tests alter a model on purpose). */
  metadata?: Record<string, GgufValueInput>;
}

export async function writeLlamaCppCopy(source: string, target: string, options: CopyOptions): Promise<string> {
  const file = await readGguf(source);
  const metadata = new Map<string, GgufValueInput>(file.metadata);
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  const name = quirkyName(file);
  if (name !== undefined) metadata.set("general.name", { type: GgufValueType.STRING, value: name.replace(NAME_QUIRKS, "model") });
  const tensors: GgufTensorSpec[] = file.tensors.map((info) => {
    const bytes = file.tensorData(info);
    if (!options.dequantize || info.type === GgmlType.F32) return { name: info.name, shape: info.shape, type: info.type, data: bytes };
    const count = info.shape.reduce((product, size) => product * size, 1);
    return { name: info.name, shape: info.shape, type: GgmlType.F32, data: dequantize(info.type, bytes, count) };
  });
  await writeGgufFile(target, { metadata, tensors, alignment: file.alignment });
  return target;
}
