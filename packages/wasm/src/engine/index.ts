// The forward pass: loading, the Transformer, its KV cache, and the architectures it knows.
export { Transformer, KVCache, loadTransformer } from "./transformer.js";
export type { ForwardBatch, ModelConfig, LoadedTransformer, LoadOptions } from "./transformer.js";
export type { LoadedMetadata } from "./load.js";
export { supportedArchitectures } from "../arch/registry.js";
export { referenceKernels } from "../kernels/reference.js";
