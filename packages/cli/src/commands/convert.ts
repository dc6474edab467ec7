import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { InferenceError, isInferenceError } from "@infer/core";
import { CONVERTIBLE_MODEL_TYPES, convertHfToGguf, OUTPUT_TYPES, type OutputType } from "../convert/index.js";
import { type Command, stringFlag, usageError } from "../command.js";
import { formatBytes } from "../format.js";
import { write } from "../io.js";

/** node's file-system failures (ENOENT, EACCES, ENOSPC, ...) become IO naming the path; anything else passes. */
export function fileSystemError(error: unknown, fallbackPath: string, context: string): unknown {
  const errno = error as NodeJS.ErrnoException;
  if (isInferenceError(error) || typeof errno?.code !== "string" || typeof errno.syscall !== "string") return error;
  const path = errno.path ?? fallbackPath;
  const reason = errno.path === undefined || errno.path === fallbackPath ? `${context}: ${errno.code}` : `${context}: ${errno.code} on ${errno.path}`;
  return new InferenceError("IO", reason, { cause: error, details: { path, errno: errno.code } });
}

/** Refuses an unwritable destination before the (long, memory-hungry) work starts. */
export async function assertWritable(out: string): Promise<void> {
  const destination = dirname(resolve(out));
  await access(destination, constants.W_OK).catch((error: unknown) => {
    throw fileSystemError(error, destination, `cannot write ${out}: its folder ${destination} is missing or not writable`);
  });
}

export const convertCommand: Command = {
  name: "convert",
  usage: "<hf-folder> <out.gguf>",
  summary: "Converts a Hugging Face model folder (config.json, safetensors, tokenizer.json) to one GGUF file for llama.cpp and the wasm engine.",
  details: [
    `Architectures (config.json model_type): ${CONVERTIBLE_MODEL_TYPES.join(", ")}. Tokenizers: BPE, SentencePiece-style or byte-level.`,
    "Norms and biases stay F32; matrices take --type (rows not divisible by 32 fall back to F16). The model is held in memory.",
  ].join("\n"),
  options: {
    type: { type: "string", value: "f16|q8_0|q4_0|f32", description: "weight type of the matrices (default f16)" },
  },
  async run(ctx) {
    const [folder, out, ...extra] = ctx.positionals;
    if (!folder || !out) throw usageError("convert needs <hf-folder> and <out.gguf>", "convert");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "convert");
    const type = (stringFlag(ctx.values, "type") ?? "f16").toLowerCase();
    if (!(type in OUTPUT_TYPES)) throw usageError(`--type must be one of ${Object.keys(OUTPUT_TYPES).join(", ")} (got ${type})`, "convert");
    // Converting holds the whole model in memory and takes a while: refuse an unwritable destination first.
    await assertWritable(out);
    const result = await convertHfToGguf(folder, out, type as OutputType).catch((error: unknown) => {
      throw fileSystemError(error, out, `cannot write ${out}`);
    });
    ctx.io.stderr.write(`infer: wrote ${result.tensors} tensors (${result.architecture}, ${type}), ${formatBytes(result.bytes)}\n`);
    await write(ctx.io.stdout, `${result.path}\n`);
    return 0;
  },
};
