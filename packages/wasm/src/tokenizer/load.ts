/**
 * `loadTokenizer(path)`: the tokenizer of a model folder (tokenizer.json and
 * its companions), of a GGUF model file, or of a vocabulary-only GGUF.
 */
import { InferenceError, parseModelJson } from "@infer/core";
import { platform } from "#platform";
import { pathFolder, type ModelFolder } from "../sources/folder.js";
import { tokenizerFromGgufMetadata } from "./gguf-vocab.js";
import { tokenizerFromHfJson } from "./hf-tokenizer.js";
import type { VocabTokenizer } from "./vocab-tokenizer.js";

const { basename, dirname, join } = platform.files;

async function exists(path: string): Promise<boolean> {
  return (await platform.files.stat(path)) !== undefined;
}

/** A JSON file of the folder, or undefined when absent (and not required); unparsable JSON is MODEL_FORMAT naming the file. */
async function readJson(folder: ModelFolder, name: string, required: boolean): Promise<unknown> {
  const text = await folder.readText(name);
  const path = folder.pathOf(name);
  if (text === undefined) {
    if (!required) return undefined;
    throw new InferenceError("MODEL_FORMAT", `${path}: cannot read the file (it is missing)`, { details: { file: path } });
  }
  return parseModelJson(text, path);
}

/** Loads the Hugging Face tokenizer files of `folder` (a path, or a folder of another source). */
export async function loadHfTokenizer(folder: string | ModelFolder): Promise<VocabTokenizer> {
  const files = typeof folder === "string" ? pathFolder(folder) : folder;
  const tokenizerPath = files.pathOf("tokenizer.json");
  const tokenizer = await readJson(files, "tokenizer.json", false);
  if (tokenizer === undefined) {
    throw new InferenceError("MODEL_FORMAT", `${files.label}: no tokenizer (tokenizer.json is missing)`, {
      details: { file: tokenizerPath, field: "tokenizer.json" },
    });
  }
  return tokenizerFromHfJson(
    {
      tokenizer,
      tokenizerConfig: await readJson(files, "tokenizer_config.json", false),
      generationConfig: await readJson(files, "generation_config.json", false),
      modelConfig: await readJson(files, "config.json", false),
      chatTemplate: await files.readText("chat_template.jinja"),
      chatTemplateSource: files.pathOf("chat_template.jinja"),
    },
    tokenizerPath,
  );
}

/** Loads the tokenizer stored in a GGUF file's metadata (a model or a vocabulary-only file). */
export async function loadGgufTokenizer(path: string): Promise<VocabTokenizer> {
  const header = await platform.files.readGgufHeader(path);
  return tokenizerFromGgufMetadata(header.metadata, path);
}

/**
 * The tokenizer at `path`: a folder with tokenizer.json (or a single .gguf),
 * a tokenizer.json file, or a GGUF file. A missing path is MODEL_NOT_FOUND; a
 * path without a tokenizer is MODEL_FORMAT naming the file or field.
 */
export async function loadTokenizer(path: string): Promise<VocabTokenizer> {
  const info = await platform.files.stat(path);
  if (info === undefined) throw new InferenceError("MODEL_NOT_FOUND", `${path}: no such file or folder`, { details: { file: path } });
  if (info.isDirectory) {
    if (await exists(join(path, "tokenizer.json"))) return loadHfTokenizer(path);
    const ggufs = (await platform.files.list(path)).filter((name) => name.toLowerCase().endsWith(".gguf"));
    if (ggufs.length === 1) return loadGgufTokenizer(join(path, ggufs[0]!));
    return loadHfTokenizer(path); // reports the missing tokenizer.json
  }
  if (basename(path) === "tokenizer.json") return loadHfTokenizer(dirname(path));
  return loadGgufTokenizer(path);
}
