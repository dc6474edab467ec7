// Seeds: tiny valid models written by the repository's own writers (one per architecture, GGUF and Hugging
// Face layouts) and a LoRA adapter for each (PEFT folder, GGUF file), plus the shared small real models when
// present. Tiny keeps each case to milliseconds.
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeGguf } from "@infer/formats";
import { lora } from "@infer/wasm";
import { writeRandomGguf, writeRandomHf } from "@infer/wasm/testing";
import { rng } from "./random.mjs";

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

/** What each architecture's seed adapter adapts: every projection on one, the usual choices on the others. */
const ADAPTED = {
  llama: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
  qwen2: ["q_proj", "v_proj"],
  qwen3: ["q_proj", "k_proj", "v_proj", "o_proj"],
  gemma3: ["gate_proj", "up_proj", "down_proj"],
  phi3: ["o_proj", "down_proj"], // its q/k/v and gate/up are fused
};
export const PEFT_FILES = [lora.PEFT_CONFIG_FILE, lora.PEFT_WEIGHTS_FILE];

/** A LoRA adapter of rank 2 with small random pairs for `architecture`'s tiny model (tinySpec's shapes). */
function tinyAdapter(architecture) {
  const { hiddenSize, numHeads, numKVHeads, headDim, ffnSize, numLayers } = tinySpec(architecture);
  const shapes = {
    q_proj: [numHeads * headDim, hiddenSize],
    k_proj: [numKVHeads * headDim, hiddenSize],
    v_proj: [numKVHeads * headDim, hiddenSize],
    o_proj: [hiddenSize, numHeads * headDim],
    gate_proj: [ffnSize, hiddenSize],
    up_proj: [ffnSize, hiddenSize],
    down_proj: [hiddenSize, ffnSize],
  };
  const r = rng(7);
  const values = (n) => Float32Array.from({ length: n }, () => (r.next() - 0.5) * 0.2);
  const rank = 2;
  const pairs = [];
  for (let layer = 0; layer < numLayers; layer++) {
    for (const module of ADAPTED[architecture]) {
      const [outFeatures, inFeatures] = shapes[module];
      pairs.push({ layer, module, rank, inFeatures, outFeatures, a: values(rank * inFeatures), b: values(outFeatures * rank) });
    }
  }
  return { rank, alpha: 4, dropout: 0, targetModules: ADAPTED[architecture], useRslora: false, layout: "hf", pairs, source: `${architecture} adapter` };
}

/**
 * Writes `architecture`'s seed adapters under `dir`: a PEFT folder for its tiny Hugging Face model and a
 * llama.cpp GGUF LoRA file for its tiny GGUF; returns their paths.
 */
export async function writeSeedAdapters(dir, architecture) {
  const peft = join(dir, `${architecture}-peft`);
  const gguf = join(dir, `${architecture}-lora.gguf`);
  const adapter = tinyAdapter(architecture);
  if (!existsSync(join(peft, lora.PEFT_CONFIG_FILE))) {
    await mkdir(peft, { recursive: true });
    for (const [name, bytes] of Object.entries(lora.peftFolderFiles(adapter, `${architecture}-hf`))) await writeFile(join(peft, name), bytes);
  }
  // Random pairs: GGUF's q/k row order is a relabelling of random rows, no conversion needed.
  if (!existsSync(gguf)) await writeFile(gguf, writeGguf(lora.ggufLoraSpec({ ...adapter, layout: "gguf" }, architecture)));
  return { peft, gguf };
}

/** Whether the seed a reproducer names can be written here (the shared real models may be absent). */
export function seedAvailable(name) {
  return ARCHITECTURES.includes(name) || !REAL_HF[name] || existsSync(join(REAL_HF[name], "config.json"));
}

/**
 * All seeds, read into memory: `gguf` [{name, path, bytes}], `hf` [{name, folder, files: {file: Buffer}}],
 * `peft` [{name, folder, base, files}] and `ggufLora` [{name, path, base, bytes}] (adapters and the model
 * they fit). `real` adds the shared models (bigger: slower cases, richer structure).
 */
export async function loadSeeds(dir, { real = false } = {}) {
  await mkdir(dir, { recursive: true });
  const gguf = [];
  const hf = [];
  const peft = [];
  const ggufLora = [];
  for (const architecture of ARCHITECTURES) {
    const paths = await writeSeedModels(dir, architecture);
    gguf.push({ name: architecture, path: paths.gguf, bytes: await readFile(paths.gguf) });
    hf.push({ name: architecture, folder: paths.hf, files: await readFiles(paths.hf) });
    const adapters = await writeSeedAdapters(dir, architecture);
    peft.push({ name: architecture, folder: adapters.peft, base: paths.hf, files: await readFiles(adapters.peft, PEFT_FILES) });
    ggufLora.push({ name: architecture, path: adapters.gguf, base: paths.gguf, bytes: await readFile(adapters.gguf) });
  }
  if (real) {
    const stories = join(SHARED, "stories260K", "stories260K.gguf");
    if (existsSync(stories)) gguf.push({ name: "stories260K", path: stories, bytes: await readFile(stories) });
    for (const [name, folder] of Object.entries(REAL_HF)) {
      if (existsSync(join(folder, "config.json"))) hf.push({ name, folder, files: await readFiles(folder) });
    }
  }
  return { gguf, hf, peft, ggufLora, tinyModel: gguf[0].path };
}

async function readFiles(folder, names = HF_FILES) {
  const files = {};
  for (const name of names) files[name] = await readFile(join(folder, name));
  return files;
}
