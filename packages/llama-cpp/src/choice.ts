import { stat } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError, type LoadOptions } from "@infer/core";

/**
 * CPU threads a decode uses when the load option `threads` is not given: one
 * fewer than the physical cores, at least one. ggml's threads meet at a
 * barrier after every operation of the graph and wait there spinning; a thread
 * that loses its core (to Node's own threads, the event loop, V8's garbage
 * collector and compiler, or to another process) holds the others spinning
 * until the scheduler gives it back, and on a small model those stalls cost
 * many times the work. Leaving one core to everything else avoids most of them;
 * on a 2-core machine it means one thread (docs/llama-cpp.md, "Threads").
 */
export function defaultThreads(physicalCores: number): number {
  return Math.max(1, Math.floor(physicalCores) - 1);
}

/**
 * Environment variable choosing the backend of GGUF files that llama_cpp can
 * read when no backend is pinned: "auto" (default: llama_cpp, measured the
 * faster at both backends' default threads, docs/llama-cpp.md "Backend
 * choice"), "llama_cpp" (the same, said explicitly) or "wasm".
 */
export const GGUF_BACKEND_ENV = "INFER_GGUF_BACKEND";
const GGUF_BACKEND_CHOICES = ["auto", "llama_cpp", "wasm"] as const;
export type GgufBackendChoice = (typeof GGUF_BACKEND_CHOICES)[number];

/** INFER_GGUF_BACKEND's value; a value it does not know is refused, not ignored. */
export function ggufBackendChoice(env: NodeJS.ProcessEnv = process.env): GgufBackendChoice {
  const value = env[GGUF_BACKEND_ENV]?.trim().toLowerCase() || "auto";
  if ((GGUF_BACKEND_CHOICES as readonly string[]).includes(value)) return value as GgufBackendChoice;
  throw new InferenceError(
    "INVALID_OPTION",
    `${GGUF_BACKEND_ENV}=${value}: expected ${GGUF_BACKEND_CHOICES.map((choice) => `"${choice}"`).join(", ")}`,
    { details: { env: GGUF_BACKEND_ENV, value } },
  );
}

/**
 * The backend a GGUF file goes to instead of llama_cpp, or undefined to stay:
 * wasm when INFER_GGUF_BACKEND says so, unless the load options ask for what
 * only llama_cpp does (a LoRA adapter, a draft model).
 */
export function fasterBackend(choice: GgufBackendChoice, options: LoadOptions): "wasm" | undefined {
  const llamaCppOnly = options.adapterPath !== undefined || options.draftModel !== undefined;
  return choice === "wasm" && !llamaCppOnly ? "wasm" : undefined;
}

/** `Backend.fasterBackendFor` of llama_cpp. */
export async function fasterBackendFor(_path: string, options: LoadOptions): Promise<string | undefined> {
  // llama.cpp reads GGUF adapters only; the wasm engine reads a PEFT folder itself.
  if (options.adapterPath !== undefined && options.draftModel === undefined && (await isPeftFolder(options.adapterPath))) return "wasm";
  return fasterBackend(ggufBackendChoice(), options);
}

async function isPeftFolder(path: string): Promise<boolean> {
  return (await stat(join(path, "adapter_config.json")).catch(() => undefined))?.isFile() === true;
}
