// @infer/wasm: the portable engine. Importing this module registers backend "wasm".
import { register } from "@infer/core";
import { wasmBackend } from "./model/backend.js";

export { loadWasmModel, wasmBackend, type WasmLoadOptions } from "./model/backend.js";
export { WasmModel } from "./model/wasm-model.js";
export { loadTokenizer, StreamDecoder, renderChat, type Tokenizer } from "./tokenizer/index.js";
export { Transformer, KVCache, type KVCacheType, type ForwardBatch, type ModelConfig } from "./engine/transformer.js";
export { loadTransformer } from "./load/load.js";
export { deleteCachedModel, listCachedModels, type CachedModel } from "./sources/cache.js";
export { referenceKernels } from "./kernels/reference.js";
export { createWasmKernels, relaxedSimdSupported, type WasmKernelOptions } from "./kernels/wasm/index.js";
// Weight matrices are typed by @infer/formats' GgmlType, or by the kernels' own layouts.
export { KernelLayout, type Kernels, type KVBuffer, type MatrixType, type WeightMatrix } from "./kernels/types.js";

register(wasmBackend);
