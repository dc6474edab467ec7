// Seeds: tiny valid models written by the repository's own writers (one per architecture, GGUF and Hugging
// Face layouts), plus the shared small real models when present. Tiny keeps each case to milliseconds.
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeRandomGguf, writeRandomHf } from "@infer/wasm/testing";

export const ARCHITECTURES = ["llama", "qwen2", "qwen3", "gemma3", "phi3"];

/** The smallest dimensions every architecture accepts. */
export const tinySpec = (architecture) => ({
  architecture,
  seed: 7,
  hiddenSize: 16,
  numHeads: 2,
  numKVHeads: 1,
  headDim: 8,
  ffnSize: 16,
  contextLength: 64,
  numLayers: 2,
});

const SHARED = new URL("../../../shared/models/", import.meta.url).pathname;
const REAL_HF = { "tinystories-656k": join(SHARED, "tinystories-656k") };
export const HF_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"];

/** Writes the tiny seed models of one architecture under `dir` (model.gguf and hf/); returns their paths. */
export async function writeSeedModels(dir, architecture) {
  const gguf = join(dir, `${architecture}.gguf`);
  const hf = join(dir, `${architecture}-hf`);
  if (!existsSync(gguf)) await writeRandomGguf(gguf, tinySpec(architecture));
  if (!existsSync(join(hf, "config.json"))) await writeRandomHf(hf, tinySpec(architecture));
  return { gguf, hf };
}

/** Whether the seed a reproducer names can be written here (the shared real models may be absent). */
export function seedAvailable(name) {
  return ARCHITECTURES.includes(name) || !REAL_HF[name] || existsSync(join(REAL_HF[name], "config.json"));
}

/**
 * All seeds, read into memory: `gguf` [{name, path, bytes}], `hf` [{name, folder, files: {file: Buffer}}].
 * `real` adds the shared models (bigger: slower cases, richer structure).
 */
export async function loadSeeds(dir, { real = false } = {}) {
  await mkdir(dir, { recursive: true });
  const gguf = [];
  const hf = [];
  for (const architecture of ARCHITECTURES) {
    const paths = await writeSeedModels(dir, architecture);
    gguf.push({ name: architecture, path: paths.gguf, bytes: await readFile(paths.gguf) });
    hf.push({ name: architecture, folder: paths.hf, files: await readFiles(paths.hf) });
  }
  if (real) {
    const stories = join(SHARED, "stories260K", "stories260K.gguf");
    if (existsSync(stories)) gguf.push({ name: "stories260K", path: stories, bytes: await readFile(stories) });
    for (const [name, folder] of Object.entries(REAL_HF)) {
      if (existsSync(join(folder, "config.json"))) hf.push({ name, folder, files: await readFiles(folder) });
    }
  }
  return { gguf, hf, tinyModel: gguf[0].path };
}

async function readFiles(folder) {
  const files = {};
  for (const name of HF_FILES) files[name] = await readFile(join(folder, name));
  return files;
}
