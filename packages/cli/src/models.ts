import { readFile, stat } from "node:fs/promises";
import { type GenerateOptions, InferenceError, isInferenceError, listBackends, loadModel, type LoadOptions, type TextModel } from "@infer/core";
import { cacheDir, resolveModel } from "@infer/hub";
import { registerBackends } from "./backends.js";
import { type CommandContext, listFlag, numberFlag, type OptionSpecs, stringFlag } from "./command.js";
import type { CliIO } from "./io.js";
import { ProgressBar } from "./progress.js";

export const LOAD_FLAGS: OptionSpecs = {
  backend: { type: "string", value: "name", description: "backend to use (wasm, llama_cpp, ...); default: the best available" },
  context: { type: "string", value: "tokens", description: "context length (KV cache size) in tokens" },
  threads: { type: "string", value: "n", description: "CPU threads" },
  "batch-size": { type: "string", value: "tokens", description: "most prompt tokens per forward pass (less memory, slower prefill when smaller)" },
};

export const SAMPLING_FLAGS: OptionSpecs = {
  "max-tokens": { type: "string", short: "n", value: "n", description: "most tokens to generate" },
  temperature: { type: "string", short: "t", value: "x", description: "sampling temperature; 0 = greedy (default 0.8)" },
  "top-k": { type: "string", value: "k", description: "keep the k most likely tokens; 0 = off (default 40)" },
  "top-p": { type: "string", value: "p", description: "nucleus sampling threshold (default 0.95)" },
  "min-p": { type: "string", value: "p", description: "drop tokens below p x the top probability (default 0.05)" },
  "repeat-penalty": { type: "string", value: "x", description: "penalty for recently seen tokens; 1 = off" },
  seed: { type: "string", value: "n", description: "random seed for reproducible sampling" },
  stop: { type: "string", multiple: true, value: "text", description: "stop when this text is generated" },
  "chat-template": { type: "string", value: "file|text", description: "Jinja chat template to use instead of (or for a model without) its own" },
};

/** The hub settings of this invocation: its environment's cache, endpoint and token. */
export function hubOptions(io: CliIO) {
  return { cacheDir: cacheDir(io.env), endpoint: io.env.HF_ENDPOINT, token: io.env.HF_TOKEN || undefined };
}

export function loadOptionsOf(ctx: CommandContext, command: string): LoadOptions {
  return {
    backend: stringFlag(ctx.values, "backend"),
    contextLength: numberFlag(ctx.values, "context", command, true),
    threads: numberFlag(ctx.values, "threads", command, true),
    batchSize: numberFlag(ctx.values, "batch-size", command, true),
  };
}

/** --chat-template takes a file when one exists at that path, else the template text itself. */
async function chatTemplateOf(ctx: CommandContext): Promise<string | undefined> {
  const value = stringFlag(ctx.values, "chat-template");
  if (value === undefined) return undefined;
  return (await stat(value).catch(() => undefined))?.isFile() ? readFile(value, "utf8") : value;
}

export async function generateOptionsOf(ctx: CommandContext, command: string): Promise<GenerateOptions> {
  const stops = listFlag(ctx.values, "stop");
  return {
    maxTokens: numberFlag(ctx.values, "max-tokens", command, true),
    temperature: numberFlag(ctx.values, "temperature", command),
    topK: numberFlag(ctx.values, "top-k", command, true),
    topP: numberFlag(ctx.values, "top-p", command),
    minP: numberFlag(ctx.values, "min-p", command),
    repeatPenalty: numberFlag(ctx.values, "repeat-penalty", command),
    seed: numberFlag(ctx.values, "seed", command, true),
    stopStrings: stops.length ? stops : undefined,
    chatTemplate: await chatTemplateOf(ctx),
  };
}

/** A model argument (path, alias or hf: reference) made local, pulling it with a progress bar when needed. */
export async function localPath(spec: string, io: CliIO, signal?: AbortSignal): Promise<string> {
  const bar = new ProgressBar(io.stderr);
  try {
    return await resolveModel(spec, { ...hubOptions(io), signal, onProgress: (p) => bar.update(p) });
  } finally {
    bar.finish();
  }
}

export interface OpenedModel {
  model: TextModel;
  path: string;
  loadMs: number;
}

/** Resolves, then loads a model with the backends that are installed. */
export async function openModel(spec: string, io: CliIO, options: LoadOptions, verbose = false): Promise<OpenedModel> {
  const path = await localPath(spec, io);
  // A pinned backend that is already registered needs no engine packages imported.
  const pinned = options.backend !== undefined && listBackends().includes(options.backend);
  const problems = pinned ? [] : await registerBackends();
  if (verbose) for (const problem of problems) io.stderr.write(`infer: backend not loaded: ${problem}\n`);
  const started = performance.now();
  let model: TextModel;
  try {
    model = await loadModel(path, options);
  } catch (error) {
    // "No backend" is often really "a backend package failed to load": say which and why.
    if (problems.length && (isInferenceError(error, "BACKEND_NOT_FOUND") || isInferenceError(error, "NO_BACKEND_FOR_FORMAT"))) {
      throw new InferenceError(error.code, `${error.message}; backend packages that failed to load: ${problems.join("; ")}`, { cause: error, details: error.details });
    }
    throw error;
  }
  const loadMs = performance.now() - started;
  if (verbose) io.stderr.write(`infer: loaded ${path} with backend ${model.backend} in ${loadMs.toFixed(0)} ms\n`);
  return { model, path, loadMs };
}
