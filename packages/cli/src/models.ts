import { readFile, stat } from "node:fs/promises";
import {
  type GenerateOptions,
  InferenceError,
  isHttpUrl,
  isInferenceError,
  isTokenizerModel,
  type LoadProgress,
  listBackends,
  loadModel,
  type LoadOptions,
  type TextModel,
  validateGenerateOptions,
  validateLoadOptions,
} from "@infer/core";
import { cacheDir, resolveModel } from "@infer/hub";
import { registerBackends } from "./backends.js";
import { type CommandContext, listFlag, numberFlag, type OptionSpecs, stringFlag, usageError } from "./command.js";
import type { CliIO } from "./io.js";
import { ProgressBar } from "./progress.js";

export const LOAD_FLAGS: OptionSpecs = {
  backend: { type: "string", value: "name", description: "backend to use (wasm, llama_cpp, ...); default: the best available" },
  context: { type: "string", value: "tokens", description: "context length (KV cache size) in tokens" },
  threads: { type: "string", value: "n", description: "CPU threads" },
  "batch-size": { type: "string", value: "tokens", description: "most prompt tokens per forward pass (less memory, slower prefill when smaller)" },
  adapter: { type: "string", value: "path", description: "LoRA adapter: a PEFT folder (wasm) or a GGUF LoRA file (both backends)" },
};

/** For the commands that keep a model running (run, chat, serve): see LoadOptions.isolate. */
export const ISOLATE_FLAG: OptionSpecs = {
  isolate: {
    type: "boolean",
    description: "run llama_cpp models in a child process each, so a native crash fails the requests in flight and restarts the model (costs a process per model)",
  },
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

/** The numeric flags that set a LoadOptions / GenerateOptions field: flag -> [field, integer]. */
const LOAD_NUMBER_FLAGS = {
  context: ["contextLength", true],
  threads: ["threads", true],
  "batch-size": ["batchSize", true],
} as const;

const GENERATE_NUMBER_FLAGS = {
  "max-tokens": ["maxTokens", true],
  temperature: ["temperature", false],
  "top-k": ["topK", true],
  "top-p": ["topP", false],
  "min-p": ["minP", false],
  "repeat-penalty": ["repeatPenalty", false],
  seed: ["seed", true],
} as const;

type NumberFlags = Record<string, readonly [string, boolean]>;

function numbersOf(ctx: CommandContext, command: string, flags: NumberFlags): Record<string, number | undefined> {
  return Object.fromEntries(Object.entries(flags).map(([flag, [field, integer]]) => [field, numberFlag(ctx.values, flag, command, integer)]));
}

const fieldsOf = (flags: NumberFlags) => Object.fromEntries(Object.entries(flags).map(([flag, [field]]) => [flag, field]));

/**
 * Checks options built from flags with the contract's own rules, before any
 * model is loaded, so that a value out of range is a usage error (exit 2)
 * naming the flag rather than a failure from deep inside a command.
 */
function checkedAgainstFlags<T>(options: T, validate: (options: T) => void, fieldOfFlag: Record<string, string>, command: string): T {
  try {
    validate(options);
  } catch (error) {
    const field = isInferenceError(error, "INVALID_OPTION") ? error.details.option : undefined;
    const flag = Object.entries(fieldOfFlag).find(([, name]) => name === field)?.[0];
    if (flag === undefined) throw error;
    throw usageError(`--${flag}: ${(error as Error).message}`, command);
  }
  return options;
}

export function loadOptionsOf(ctx: CommandContext, command: string): LoadOptions {
  const options: LoadOptions = {
    backend: stringFlag(ctx.values, "backend"),
    adapterPath: stringFlag(ctx.values, "adapter"),
    ...numbersOf(ctx, command, LOAD_NUMBER_FLAGS),
    ...(ctx.values.isolate === true && { isolate: true }),
  };
  return checkedAgainstFlags(options, validateLoadOptions, { backend: "backend", adapter: "adapterPath", ...fieldsOf(LOAD_NUMBER_FLAGS) }, command);
}

/** --chat-template takes a file when one exists at that path, else the template text itself. */
export async function chatTemplateOf(ctx: CommandContext): Promise<string | undefined> {
  const value = stringFlag(ctx.values, "chat-template");
  if (value === undefined) return undefined;
  return (await stat(value).catch(() => undefined))?.isFile() ? readFile(value, "utf8") : value;
}

export async function generateOptionsOf(ctx: CommandContext, command: string): Promise<GenerateOptions> {
  const stops = listFlag(ctx.values, "stop");
  const options: GenerateOptions = {
    ...numbersOf(ctx, command, GENERATE_NUMBER_FLAGS),
    stopStrings: stops.length ? stops : undefined,
    chatTemplate: await chatTemplateOf(ctx),
  };
  const fields = { ...fieldsOf(GENERATE_NUMBER_FLAGS), stop: "stopStrings", "chat-template": "chatTemplate" };
  return checkedAgainstFlags(options, validateGenerateOptions, fields, command);
}

/**
 * Renders a one-message conversation so that a model without a chat template
 * (and no --chat-template) fails when it is opened, not after the first prompt.
 * `otherwise` tells what the command can do without one.
 */
export function requireChatTemplate(model: TextModel, spec: string, chatTemplate: string | undefined, otherwise = ""): void {
  // A model that cannot render without generating is left to fail at its first answer.
  if (!isTokenizerModel(model)) return;
  try {
    model.applyChatTemplate([{ role: "user", content: "hello" }], { chatTemplate, addGenerationPrompt: true });
  } catch (error) {
    if (!isInferenceError(error, "NO_CHAT_TEMPLATE")) throw error;
    throw new InferenceError("NO_CHAT_TEMPLATE", `${spec} has no chat template of its own${otherwise}`, { cause: error, details: { model: spec } });
  }
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

/**
 * A bar for a backend's own download (a model file's URL), fed by LoadOptions.onProgress: the
 * same bar as a pull, its rate measured here.
 */
function downloadProgress(bar: ProgressBar, file: string): (progress: LoadProgress) => void {
  const started = performance.now();
  return ({ phase, loadedBytes, totalBytes }) => {
    if (phase !== "download") return;
    const seconds = (performance.now() - started) / 1000;
    bar.update({ file, received: loadedBytes, total: totalBytes, resumedFrom: 0, bytesPerSec: seconds > 0 ? loadedBytes / seconds : 0, index: 0, count: 1 });
  };
}

/**
 * Resolves, then loads a model with the backends that are installed. An http(s) URL is loaded as
 * it is: a server's (backend remote) or a model file's, which the backend downloads itself.
 */
export async function openModel(spec: string, io: CliIO, options: LoadOptions, verbose = false): Promise<OpenedModel> {
  const url = isHttpUrl(spec);
  const path = url ? spec : await localPath(spec, io);
  // A pinned backend that is already registered needs no engine packages imported.
  const pinned = options.backend !== undefined && listBackends().includes(options.backend);
  const problems = pinned ? [] : await registerBackends();
  if (verbose) for (const problem of problems) io.stderr.write(`infer: backend not loaded: ${problem}\n`);
  const started = performance.now();
  let model: TextModel;
  const bar = new ProgressBar(io.stderr);
  try {
    const onProgress = url && options.onProgress === undefined ? downloadProgress(bar, spec) : undefined;
    model = await loadModel(path, onProgress ? { ...options, onProgress } : options);
  } catch (error) {
    // "No backend" is often really "a backend package failed to load": say which and why.
    if (problems.length && (isInferenceError(error, "BACKEND_NOT_FOUND") || isInferenceError(error, "NO_BACKEND_FOR_FORMAT"))) {
      throw new InferenceError(error.code, `${error.message}; backend packages that failed to load: ${problems.join("; ")}`, { cause: error, details: error.details });
    }
    throw error;
  } finally {
    bar.finish();
  }
  const loadMs = performance.now() - started;
  for (const warning of model.info().warnings ?? []) io.stderr.write(`infer: warning: ${warning}\n`);
  if (verbose) io.stderr.write(`infer: loaded ${path} with backend ${model.backend} in ${loadMs.toFixed(0)} ms\n`);
  return { model, path, loadMs };
}
