import { InferenceError } from "@infer/core";

/**
 * Short names for well-known small models, mapped to their Hugging Face
 * repositories (instruct variants, the ones chat wants). Gated repositories
 * (Llama, Gemma) need HF_TOKEN of an account that accepted their licence.
 */
const BUILTIN_ALIASES: Record<string, string> = {
  "smollm2-135m": "hf:HuggingFaceTB/SmolLM2-135M-Instruct",
  "smollm2-360m": "hf:HuggingFaceTB/SmolLM2-360M-Instruct",
  "smollm2-1.7b": "hf:HuggingFaceTB/SmolLM2-1.7B-Instruct",
  "qwen2.5-0.5b": "hf:Qwen/Qwen2.5-0.5B-Instruct",
  "qwen2.5-0.5b-gguf": "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0",
  "qwen2.5-1.5b": "hf:Qwen/Qwen2.5-1.5B-Instruct",
  "qwen3-0.6b": "hf:Qwen/Qwen3-0.6B",
  "qwen3-0.6b-gguf": "hf:Qwen/Qwen3-0.6B-GGUF:Q8_0",
  "qwen3-1.7b": "hf:Qwen/Qwen3-1.7B",
  "llama-3.2-1b": "hf:meta-llama/Llama-3.2-1B-Instruct",
  "llama-3.2-3b": "hf:meta-llama/Llama-3.2-3B-Instruct",
  "gemma-3-270m": "hf:google/gemma-3-270m-it",
  "gemma-3-1b": "hf:google/gemma-3-1b-it",
  "phi-3.5-mini": "hf:microsoft/Phi-3.5-mini-instruct",
  "tinyllama-1.1b": "hf:TinyLlama/TinyLlama-1.1B-Chat-v1.0",
};

const aliases = new Map<string, string>(Object.entries(BUILTIN_ALIASES));

/** Adds or replaces an alias; `target` is an `hf:` reference or a local path. */
export function registerAlias(name: string, target: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) {
    throw new InferenceError("INVALID_OPTION", `alias '${name}' must be letters, digits, '.', '_' or '-'`, { details: { name } });
  }
  if (typeof target !== "string" || target.length === 0) {
    throw new InferenceError("INVALID_OPTION", `alias '${name}' needs a non-empty target`, { details: { name } });
  }
  aliases.set(name.toLowerCase(), target);
}

/** The target of an alias (case-insensitive), or undefined. */
export function resolveAlias(name: string): string | undefined {
  return aliases.get(name.toLowerCase());
}

/** Every alias and its target, sorted by name. */
export function listAliases(): Array<{ name: string; target: string }> {
  return [...aliases].map(([name, target]) => ({ name, target })).sort((a, b) => a.name.localeCompare(b.name));
}
