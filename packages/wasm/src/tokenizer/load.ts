/**
 * `loadTokenizer(path)`: the tokenizer of a model folder (tokenizer.json and
 * its companions), of a GGUF model file, or of a vocabulary-only GGUF.
 */
import { readFile, readdir, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { InferenceError, parseModelJson } from "@infer/core";
import { readGgufHeader } from "@infer/formats/node";
import { tokenizerFromGgufMetadata } from "./gguf-vocab.js";
import { tokenizerFromHfJson } from "./hf-tokenizer.js";
import type { VocabTokenizer } from "./vocab-tokenizer.js";

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** A JSON file of the folder, or undefined when absent; unparsable JSON is MODEL_FORMAT naming the file. */
async function readJson(path: string, required: boolean): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new InferenceError("MODEL_FORMAT", `${path}: cannot read the file (${(error as NodeJS.ErrnoException).code ?? String(error)})`, {
      cause: error,
      details: { file: path },
    });
  }
  return parseModelJson(text, path);
}

async function readOptionalText(path: string): Promise<string | undefined> {
  return (await exists(path)) ? readFile(path, "utf8") : undefined;
}

/** Loads the Hugging Face tokenizer files of `folder`. */
export async function loadHfTokenizer(folder: string): Promise<VocabTokenizer> {
  const tokenizerPath = join(folder, "tokenizer.json");
  if (!(await exists(tokenizerPath))) {
    throw new InferenceError("MODEL_FORMAT", `${folder}: no tokenizer (tokenizer.json is missing)`, {
      details: { file: tokenizerPath, field: "tokenizer.json" },
    });
  }
  return tokenizerFromHfJson(
    {
      tokenizer: await readJson(tokenizerPath, true),
      tokenizerConfig: await readJson(join(folder, "tokenizer_config.json"), false),
      generationConfig: await readJson(join(folder, "generation_config.json"), false),
      modelConfig: await readJson(join(folder, "config.json"), false),
      chatTemplate: await readOptionalText(join(folder, "chat_template.jinja")),
      chatTemplateSource: join(folder, "chat_template.jinja"),
    },
    tokenizerPath,
  );
}

/** Loads the tokenizer stored in a GGUF file's metadata (a model or a vocabulary-only file). */
export async function loadGgufTokenizer(path: string): Promise<VocabTokenizer> {
  const header = await readGgufHeader(path);
  return tokenizerFromGgufMetadata(header.metadata, path);
}

/**
 * The tokenizer at `path`: a folder with tokenizer.json (or a single .gguf),
 * a tokenizer.json file, or a GGUF file. A missing path is MODEL_NOT_FOUND; a
 * path without a tokenizer is MODEL_FORMAT naming the file or field.
 */
export async function loadTokenizer(path: string): Promise<VocabTokenizer> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    throw new InferenceError("MODEL_NOT_FOUND", `${path}: no such file or folder`, { cause: error, details: { file: path } });
  }
  if (info.isDirectory()) {
    if (await exists(join(path, "tokenizer.json"))) return loadHfTokenizer(path);
    const ggufs = (await readdir(path)).filter((name) => name.toLowerCase().endsWith(".gguf"));
    if (ggufs.length === 1) return loadGgufTokenizer(join(path, ggufs[0]!));
    return loadHfTokenizer(path); // reports the missing tokenizer.json
  }
  if (basename(path) === "tokenizer.json") return loadHfTokenizer(dirname(path));
  return loadGgufTokenizer(path);
}
