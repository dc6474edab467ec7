import { type Backend, register } from "@infer/core";
import { fasterBackendFor } from "./choice.js";
import { hasGgufMagic } from "./gguf.js";
import { loadLlamaCppModel } from "./load.js";
import { runtimeAvailable, runtimeUnavailableReason } from "./runtime.js";

export { LlamaCppModel, type LlamaCppParts } from "./model.js";
export { loadLlamaCppModel } from "./load.js";
export { hasGgufMagic, assertGgufFile, describeQuantization } from "./gguf.js";
export { defaultThreads, GGUF_BACKEND_ENV } from "./choice.js";

/** Backend "llama_cpp": GGUF models on llama.cpp's prebuilt binaries (CPU, or a GPU flavour when installed). */
export const llamaCppBackend: Backend = {
  name: "llama_cpp",
  available: runtimeAvailable,
  unavailableReason: runtimeUnavailableReason,
  canLoad: hasGgufMagic,
  loadModel: loadLlamaCppModel,
  fasterBackendFor,
  capabilities: {
    generate: "supported",
    chat: "supported",
    classify: "supported",
    "batch.generate": "supported",
    tokenizer: "supported",
    "chat.template": "supported",
    embeddings: "supported",
    grammar: "supported",
    speculative: "supported",
    "lora.inference": "supported",
    "lora.training": "unsupported",
    "probe.logits": "unsupported",
    "probe.attention": "unsupported",
    "kv.snapshot": "unsupported",
  },
};

register(llamaCppBackend);
