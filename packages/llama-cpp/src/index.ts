import { type Backend, register } from "@infer/core";
import { LLAMA_CPP_CAPABILITIES } from "./capabilities.js";
import { fasterBackendFor } from "./choice.js";
import { hasGgufMagic } from "./gguf.js";
import { loadLlamaCppModel } from "./load.js";
import { runtimeAvailable, runtimeUnavailableReason } from "./runtime.js";

export { LlamaCppModel } from "./model.js";
export { IsolatedLlamaCppModel } from "./isolate-model.js";
export type { LlamaCppParts } from "./parts.js";
export { loadLlamaCppModel } from "./load.js";
export { hasGgufMagic, assertGgufFile } from "./gguf.js";
export { defaultThreads, GGUF_BACKEND_ENV } from "./choice.js";

/** Backend "llama_cpp": GGUF models on llama.cpp's prebuilt binaries (CPU, or a GPU flavour when installed). */
export const llamaCppBackend: Backend = {
  name: "llama_cpp",
  available: runtimeAvailable,
  unavailableReason: runtimeUnavailableReason,
  canLoad: hasGgufMagic,
  loadModel: loadLlamaCppModel,
  fasterBackendFor,
  capabilities: LLAMA_CPP_CAPABILITIES,
};

register(llamaCppBackend);
