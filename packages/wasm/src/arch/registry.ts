/** Architecture lookup by GGUF general.architecture or HF model_type / architectures[0]. */
import { InferenceError } from "@infer/core";
import type { Architecture } from "./types.js";
import { llama } from "./llama.js";
import { qwen2 } from "./qwen2.js";
import { qwen3 } from "./qwen3.js";
import { gemma3 } from "./gemma3.js";
import { phi3 } from "./phi3.js";

export const ARCHITECTURES: readonly Architecture[] = [llama, qwen2, qwen3, gemma3, phi3];

export function supportedArchitectures(): string[] {
  return ARCHITECTURES.map((a) => a.id);
}

/** The architecture for a GGUF name, or for the first of the HF names that is known. */
export function findArchitecture(format: "gguf" | "safetensors", names: string[], file: string): Architecture {
  for (const name of names) {
    const found = ARCHITECTURES.find((a) => (format === "gguf" ? a.ggufNames : a.hfNames).includes(name));
    if (found) return found;
  }
  const named = names.length ? names.map((n) => `"${n}"`).join(" / ") : "(none stated)";
  throw new InferenceError(
    "UNSUPPORTED_ARCHITECTURE",
    `${file}: architecture ${named} is not supported; supported: ${supportedArchitectures().join(", ")}`,
    { details: { file, architecture: names[0], supported: supportedArchitectures() } },
  );
}
