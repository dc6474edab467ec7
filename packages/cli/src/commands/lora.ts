import { convertLoraToGguf, mergeAdapter } from "../convert/lora.js";
import { type Command, stringFlag, usageError } from "../command.js";
import { formatBytes } from "../format.js";
import { write } from "../io.js";
import { assertWritable, fileSystemError } from "./convert.js";

export const convertLoraCommand: Command = {
  name: "convert-lora",
  usage: "<peft-folder> <out.gguf>",
  summary: "Converts a PEFT LoRA adapter folder to a llama.cpp GGUF LoRA file (for adapterPath on backend llama_cpp).",
  details: [
    "The base model gives the architecture and head counts (llama's q/k rows are permuted as llama.cpp's converter does):",
    "--base, else the adapter's base_model_name_or_path when it is a local folder. Tensors are written as F32.",
  ].join("\n"),
  options: {
    base: { type: "string", value: "path", description: "the base model: a Hugging Face folder or a GGUF file" },
  },
  async run(ctx) {
    const [folder, out, ...extra] = ctx.positionals;
    if (!folder || !out) throw usageError("convert-lora needs <peft-folder> and <out.gguf>", "convert-lora");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "convert-lora");
    await assertWritable(out);
    const result = await convertLoraToGguf(folder, out, stringFlag(ctx.values, "base")).catch((error: unknown) => {
      throw fileSystemError(error, out, `cannot write ${out}`);
    });
    ctx.io.stderr.write(`infer: wrote ${result.pairs} LoRA pairs (${result.architecture}), ${formatBytes(result.bytes)}\n`);
    await write(ctx.io.stdout, `${result.path}\n`);
    return 0;
  },
};

export const mergeCommand: Command = {
  name: "merge",
  usage: "<model> <adapter> <out>",
  summary: "Bakes a LoRA adapter (PEFT folder or GGUF LoRA) into its base model's weights: a GGUF file, or a Hugging Face folder.",
  details: [
    "A GGUF model gives a GGUF file; a Hugging Face folder gives a folder (its other files copied, weights in one model.safetensors).",
    "Adapted matrices keep their type: quantized ones are dequantized, merged and quantized again (lossy; named on stderr).",
  ].join("\n"),
  options: {},
  async run(ctx) {
    const [model, adapter, out, ...extra] = ctx.positionals;
    if (!model || !adapter || !out) throw usageError("merge needs <model>, <adapter> and <out>", "merge");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "merge");
    await assertWritable(out);
    const result = await mergeAdapter(model, adapter, out).catch((error: unknown) => {
      throw fileSystemError(error, out, `cannot write ${out}`);
    });
    const lossy = result.reencoded.length ? `; dequantized and re-encoded as ${result.reencoded.join(", ")}` : "";
    ctx.io.stderr.write(`infer: merged the adapter into ${result.merged} matrices (${result.format})${lossy}\n`);
    await write(ctx.io.stdout, `${result.path}\n`);
    return 0;
  },
};
