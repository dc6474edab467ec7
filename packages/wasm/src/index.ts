// @infer/wasm: the portable engine. Importing this module registers backend "wasm".
import { register } from "@infer/core";
import { wasmBackend } from "./model/backend.js";

export { loadWasmModel, wasmBackend, type WasmLoadOptions } from "./model/backend.js";
export { WasmModel } from "./model/wasm-model.js";
export { loadTokenizer, StreamDecoder, renderChat, type Tokenizer } from "./tokenizer/index.js";
export { Transformer, KVCache, type KVCacheType, type ForwardBatch, type ModelConfig } from "./engine/transformer.js";
export { loadTransformer } from "./load/load.js";
export { referenceKernels } from "./kernels/reference.js";
export { createWasmKernels, relaxedSimdSupported, type WasmKernelOptions } from "./kernels/wasm/index.js";
export { GgmlType, type Kernels, type KVBuffer, type WeightMatrix } from "./kernels/types.js";
export * as formats from "./formats/index.js";

register(wasmBackend);
