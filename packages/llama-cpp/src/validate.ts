// Every file llama.cpp is handed is read first by @infer/formats' bounded parser and checked against
// what llama.cpp asserts on: a corrupt file is then a MODEL_FORMAT naming the field, never a process
// abort (GGML_ASSERT), nor minutes and gigabytes spent before llama.cpp's own reader gives up.
import type { LoadOptions } from "@infer/core";
import { GgmlType, type GgufHeader, getNumber, getString, typeName } from "@infer/formats";
import { readGgufHeader } from "@infer/formats/node";
import { assertHyperparameters } from "./hparams.js";
import { assertLoraShapes } from "./lora-shapes.js";
import { assertTensorShapes } from "./tensor-shapes.js";
import { assertVocabulary } from "./vocab-check.js";
import { formatError } from "./format-error.js";

/**
 * Checks the model file and, when given, the LoRA adapter and the draft model,
 * before node-llama-cpp reads any of them. The files are known to exist and
 * to start with a GGUF preamble (assertGgufFile): this reads each header and
 * tensor table whole, every count and length bounded by the file's size, so
 * every tensor's data lies inside the file, aligned, with a known type.
 * Resolves with the headers of the model and the draft.
 */
export async function assertLlamaCppCanRead(
  path: string,
  options: Pick<LoadOptions, "adapterPath" | "draftModel">,
): Promise<{ model: GgufHeader; draft?: GgufHeader }> {
  const model = await assertModelFile(path);
  if (options.adapterPath !== undefined) await assertAdapterFile(options.adapterPath, model);
  const draft = options.draftModel !== undefined ? await assertModelFile(options.draftModel) : undefined;
  return { model, ...(draft && { draft }) };
}

/** A model: its header, hyperparameters and vocabulary as llama.cpp reads them. */
export async function assertModelFile(path: string): Promise<GgufHeader> {
  const header = await readHeader(path);
  const { metadata } = header;
  if (getString(metadata, "general.type") === "adapter") {
    throw formatError(path, "general.type", 'is "adapter": this is a LoRA adapter, not a model (pass it as adapterPath)');
  }
  const arch = getString(metadata, "general.architecture", true);
  assertTensorShapes(header, arch, assertHyperparameters(header, arch));
  assertVocabulary(header, arch);
  assertVectorTypes(header);
  assertMultipliableTypes(header);
  return header;
}

/**
 * The header, refusing an empty metadata key or one holding a NUL: llama.cpp
 * copies keys as C strings, so such a key reaches its key-value constructor
 * empty and aborts (GGML_ASSERT(!key.empty())).
 */
async function readHeader(path: string): Promise<GgufHeader> {
  const header = await readGgufHeader(path);
  const bad = [...header.metadata.keys()].findIndex((key) => key === "" || key.includes("\0"));
  if (bad >= 0) throw formatError(path, `metadata key #${bad}`, "is empty or holds a NUL character; llama.cpp reads keys as C strings");
  return header;
}

/**
 * Norm weights and biases are added to or multiplied with F32 activations,
 * and llama.cpp's CPU kernels for that take F32 vectors only: another type
 * aborts the first generation (ggml's binary ops). Its own converters always
 * store them as F32.
 */
function assertVectorTypes(header: GgufHeader): void {
  for (const tensor of header.tensors) {
    if (!/(norm\.weight|\.bias)$/.test(tensor.name) || tensor.type === GgmlType.F32) continue;
    throw formatError(header.source, `tensor "${tensor.name}"`, `is stored as ${typeName(tensor.type)}; llama.cpp adds norm weights and biases as F32 only`);
  }
}

/**
 * Types ggml's CPU backend has no dot product for (ggml-cpu.c's type traits
 * leave vec_dot unset): a weight of one of them reaches a null function
 * pointer in the first matrix multiplication and the process dies of SIGSEGV.
 * llama.cpp's loader does not check (its buffer-type probe asks only whether
 * the activations' type fits), nor does its LoRA loader; its converters never
 * write these types for a weight.
 */
const NOT_MULTIPLIABLE = new Set<number>([GgmlType.Q8_1, GgmlType.Q8_K, GgmlType.I8, GgmlType.I16, GgmlType.I32, GgmlType.I64, GgmlType.F64]);

function assertMultipliableTypes(header: GgufHeader): void {
  const tensor = header.tensors.find((t) => NOT_MULTIPLIABLE.has(t.type));
  if (!tensor) return;
  throw formatError(header.source, `tensor "${tensor.name}"`, `is stored as ${typeName(tensor.type)}, a type llama.cpp cannot multiply by (its CPU kernels have no dot product for it)`);
}

/**
 * A LoRA adapter: its header and tensor table, tensor types llama.cpp multiplies by, shapes that fit
 * `model`'s graph, and a finite alpha (llama.cpp scales every delta by it).
 */
export async function assertAdapterFile(path: string, model: GgufHeader): Promise<GgufHeader> {
  const header = await readHeader(path);
  assertMultipliableTypes(header);
  assertLoraShapes(header, model);
  const alpha = getNumber(header.metadata, "adapter.lora.alpha");
  if (alpha !== undefined && !Number.isFinite(alpha)) throw formatError(path, "adapter.lora.alpha", `is ${alpha}, not a finite number`);
  return header;
}
