import {
  DEFAULT_PROMPT_CACHE_BYTES,
  type Backend,
  contextLengthWarnings,
  describeSource,
  InferenceError,
  type LoadOptions,
  type ModelSource,
  ProbeBus,
  type TextModel,
  validateLoadOptions,
} from "@infer/core";
import { GgmlType } from "@infer/formats";
import { platform } from "#platform";
import { KV_ELEMENT_BYTES } from "../engine/cache.js";
import type { KVCacheType } from "../engine/transformer.js";
import { loadTransformer, type LoadedTransformer } from "../load/load.js";
import { referenceKernels } from "../kernels/reference.js";
import type { Kernels } from "../kernels/types.js";
import { createWasmKernels } from "../kernels/wasm/index.js";
import { tokenizerFromGgufMetadata } from "../tokenizer/gguf-vocab.js";
import { loadHfTokenizer } from "../tokenizer/load.js";
import { WASM_CAPABILITIES } from "./capabilities.js";
import { WasmModel } from "./wasm-model.js";
import { WasmTrainableModel } from "./trainable-model.js";
import { baseModelWarning, loraDeltas, readLoraAdapter } from "../lora/index.js";

/** Default sequence slots when `parallelSlots` is not given. */
const DEFAULT_SLOTS = 4;
/** Share of physical memory the default context may give the KV cache. */
const KV_MEMORY_SHARE = 1 / 8;
/** Most the default KV cache may take, whatever the machine. */
const KV_DEFAULT_CAP_BYTES = 4 * 2 ** 30;

export interface WasmLoadOptions extends LoadOptions {
  /**
   * Kernels to run on (tests pass the reference kernels or a configured WASM
   * pool); the caller keeps ownership and disposes them. Default: WebAssembly
   * SIMD kernels on `threads` threads, owned by the model, or the plain
   * TypeScript reference kernels when the environment sets
   * INFER_WASM_KERNELS=reference.
   */
  kernels?: Kernels;
  /**
   * Browsers: keep a model downloaded from a URL (a GGUF file, or a Hugging Face folder with all its
   * files) in the Origin Private File System and load it from there next time (default true). See
   * listCachedModels / deleteCachedModel.
   */
  cache?: boolean;
  /**
   * Run a short greedy generation at load so that the first one after it is as
   * fast as later ones (WasmModel.warmUp). Default: true where the model runs
   * on WebAssembly kernels of its own; false loads faster.
   */
  warmUp?: boolean;
}

/**
 * Environment variable choosing the kernels: "wasm" (default: the WebAssembly
 * kernels, with relaxed SIMD where the runtime has it), "wasm-simd" (without
 * relaxed SIMD), "wasm-relaxed-simd" (an error where the runtime lacks it) or
 * "reference".
 */
export const KERNELS_ENV = "INFER_WASM_KERNELS";

/** LoadOptions.quantize names (as core validates them) to ggml types. */
const QUANTIZE_TYPES: Readonly<Record<string, GgmlType>> = {
  f32: GgmlType.F32,
  f16: GgmlType.F16,
  bf16: GgmlType.BF16,
  q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0,
  q4_1: GgmlType.Q4_1,
  q5_0: GgmlType.Q5_0,
  q5_1: GgmlType.Q5_1,
  q4_k: GgmlType.Q4_K,
  q5_k: GgmlType.Q5_K,
  q6_k: GgmlType.Q6_K,
};

export const wasmBackend: Backend = {
  name: "wasm",
  capabilities: WASM_CAPABILITIES,
  available: () => "WebAssembly" in globalThis,
  unavailableReason: () => "this JavaScript runtime has no WebAssembly",
  canLoad: isModelPath,
  loadModel: (path: string, options?: LoadOptions) => loadWasmModel(path, options),
  loadSource: (source: ModelSource, options?: LoadOptions) => loadWasmModel(source, options),
};

/** A GGUF file or a Hugging Face folder (sniffed by content where there is a file system). */
async function isModelPath(path: string): Promise<boolean> {
  const format = await platform.files.detectFormat(path);
  return format === "gguf" || format === "safetensors";
}

/**
 * Loads a GGUF file or a Hugging Face folder on our engine: from a path, an http(s) URL (a
 * folder's ends with "/"), a Blob/File or bytes (GGUF).
 */
export async function loadWasmModel(source: ModelSource, options: WasmLoadOptions = {}): Promise<TextModel> {
  const label = describeSource(source);
  const { kernels: given, cache, warmUp, ...loadOptions } = options;
  if (cache !== undefined && typeof cache !== "boolean") {
    throw new InferenceError("INVALID_OPTION", `load option 'cache' must be a boolean (got ${String(cache)})`, { details: { option: "cache", value: cache } });
  }
  validateLoadOptions(loadOptions);
  if (warmUp !== undefined && typeof warmUp !== "boolean") {
    throw new InferenceError("INVALID_OPTION", `warmUp must be a boolean, got ${String(warmUp)}`, { details: { option: "warmUp", value: warmUp } });
  }
  rejectUnsupported(loadOptions);
  const quantize = loadOptions.quantize === undefined ? undefined : QUANTIZE_TYPES[loadOptions.quantize.toLowerCase()];
  if (loadOptions.quantize !== undefined && quantize === undefined) {
    throw new InferenceError("UNSUPPORTED", `backend wasm cannot quantize to ${loadOptions.quantize}`, {
      details: { option: "quantize", value: loadOptions.quantize },
    });
  }
  const kernels = given ?? (await defaultKernels(loadOptions.threads));
  const ownsKernels = given === undefined;
  let loaded: LoadedTransformer;
  try {
    loaded = await loadTransformer(source, { kernels, quantize, onProgress: loadOptions.onProgress, cache });
  } catch (error) {
    if (ownsKernels) await kernels.dispose?.();
    throw error;
  }
  let model: WasmModel;
  try {
    const warnings = loadOptions.adapterPath === undefined ? [] : await applyAdapter(loadOptions.adapterPath, label, loaded);
    model = await assemble(label, loaded, loadOptions, ownsKernels, warnings);
  } catch (error) {
    await (ownsKernels ? loaded.transformer.dispose() : loaded.transformer.releaseMemory());
    throw error;
  }
  // The plain TypeScript kernels have no V8 compilation racing their threads to hide.
  if (warmUp ?? (ownsKernels && kernels !== referenceKernels)) {
    try {
      await model.warmUp();
    } catch (error) {
      await model.close();
      throw error;
    }
  }
  return model;
}

/** KERNELS_ENV's WebAssembly choices, as createWasmKernels' relaxedSimd option. */
const WASM_CHOICES: Readonly<Record<string, boolean | undefined>> = { wasm: undefined, "wasm-simd": false, "wasm-relaxed-simd": true };

/** The kernels a model gets when the caller names none. */
async function defaultKernels(threads: number | undefined): Promise<Kernels> {
  const choice = platform.env(KERNELS_ENV)?.trim().toLowerCase() || "wasm";
  if (choice === "reference") return referenceKernels;
  const relaxedSimd = WASM_CHOICES[choice];
  if (!Object.hasOwn(WASM_CHOICES, choice)) {
    throw new InferenceError("INVALID_OPTION", `${KERNELS_ENV}=${choice}: expected "wasm", "wasm-simd", "wasm-relaxed-simd" or "reference"`, {
      details: { env: KERNELS_ENV, value: choice },
    });
  }
  return createWasmKernels({ threads, relaxedSimd });
}

/** Reads LoadOptions.adapterPath and adds its deltas to the model's projections; returns the warnings for ModelInfo. */
async function applyAdapter(adapterPath: string, path: string, loaded: LoadedTransformer): Promise<string[]> {
  const adapter = await readLoraAdapter(adapterPath);
  loaded.transformer.lora = loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });
  const warning = baseModelWarning(adapter, path);
  return warning === undefined ? [] : [warning];
}

async function assemble(
  path: string,
  loaded: LoadedTransformer,
  loadOptions: LoadOptions,
  ownsKernels: boolean,
  adapterWarnings: string[],
): Promise<WasmModel> {
  // A GGUF's vocabulary comes from the metadata already parsed: the file is read once.
  const tokenizer =
    loaded.metadata.format === "gguf"
      ? tokenizerFromGgufMetadata(loaded.metadata.gguf.metadata, path)
      : await loadHfTokenizer(loaded.metadata.folder);
  const config = loaded.transformer.config;
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new InferenceError(
      "MODEL_FORMAT",
      `${path}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's embedding has ${config.vocabSize} rows`,
      { details: { file: path, field: "vocab_size" } },
    );
  }
  const parallelSlots = loadOptions.parallelSlots ?? DEFAULT_SLOTS;
  const kvType = kvCacheType(loadOptions, loaded);
  const contextLength = chooseContextLength(loaded, kvType, parallelSlots, loadOptions.contextLength);
  const Model = loaded.transformer.weights.trainable ? WasmTrainableModel : WasmModel;
  return new Model({
    source: path,
    kvType,
    transformer: loaded.transformer,
    tokenizer,
    contextLength,
    parallelSlots,
    batchSize: loadOptions.batchSize,
    promptCacheBytes: loadOptions.promptCacheBytes ?? DEFAULT_PROMPT_CACHE_BYTES,
    probe: new ProbeBus(loadOptions.probe),
    info: {
      architecture: config.architecture,
      vocabSize: config.vocabSize,
      numLayers: config.numLayers,
      hiddenSize: config.hiddenSize,
      contextLength,
      quantBits: loaded.quantBits,
      quantGroup: loaded.quantGroup,
      format: loaded.format,
      parameters: loaded.transformer.parameterCount,
      trainedContextLength: config.contextLength,
      warnings: [...contextLengthWarnings(contextLength, config.contextLength), ...adapterWarnings],
    },
    // Kernels the model made are its own to stop; a caller's are only handed their memory back.
    dispose: async () => {
      if (ownsKernels) await loaded.transformer.dispose();
      else loaded.transformer.releaseMemory();
    },
  });
}

/** The KV cache encoding asked for (core's validation allows only f32, f16 and q8_0). */
function kvCacheType(options: LoadOptions, loaded: LoadedTransformer): KVCacheType {
  const kvType = (options.kvType?.toLowerCase() ?? "f32") as KVCacheType;
  const { numKVHeads, headDim } = loaded.transformer.config;
  if (kvType === "q8_0" && (numKVHeads * headDim) % 32 !== 0) {
    throw new InferenceError(
      "UNSUPPORTED",
      `kvType q8_0 needs the model's numKVHeads * headDim to be a multiple of 32 (Q8_0 blocks); this model's is ${numKVHeads * headDim}`,
      { details: { option: "kvType", value: options.kvType } },
    );
  }
  return kvType;
}

/** Bytes of keys and values one position takes across all layers. */
function kvBytesPerPosition(loaded: LoadedTransformer, kvType: KVCacheType): number {
  const { numLayers, numKVHeads, headDim } = loaded.transformer.config;
  return numLayers * 2 * numKVHeads * headDim * KV_ELEMENT_BYTES[kvType];
}

/**
 * The model's trained context unless asked otherwise, capped so the default KV
 * cache stays a modest share of memory; an explicit request that cannot fit in
 * memory fails before anything is allocated.
 */
function chooseContextLength(
  loaded: LoadedTransformer,
  kvType: KVCacheType,
  slots: number,
  requested: number | undefined,
): number {
  const perPosition = kvBytesPerPosition(loaded, kvType) * slots;
  if (requested !== undefined) {
    const needed = perPosition * requested;
    const memory = platform.memoryBytes();
    if (needed > memory * 0.75) {
      throw new InferenceError(
        "INVALID_OPTION",
        `contextLength ${requested} with ${slots} slots needs ${gib(needed)} GiB of KV cache; this machine has ${gib(memory)} GiB`,
        { details: { option: "contextLength", value: requested } },
      );
    }
    return requested;
  }
  const budget = Math.min(KV_DEFAULT_CAP_BYTES, platform.memoryBytes() * KV_MEMORY_SHARE);
  const fits = Math.max(256, Math.floor(budget / perPosition));
  return Math.min(loaded.transformer.config.contextLength, fits);
}

function gib(bytes: number): string {
  return (bytes / 2 ** 30).toFixed(1);
}

function rejectUnsupported(options: LoadOptions): void {
  if (options.draftModel !== undefined) {
    throw new InferenceError("UNSUPPORTED", "backend wasm has no speculative decoding (draftModel)", {
      details: { option: "draftModel" },
    });
  }
  if (options.isolate === true) {
    throw new InferenceError("UNSUPPORTED", "backend wasm runs no native code and cannot isolate a model in a child process (isolate)", {
      details: { option: "isolate" },
    });
  }
  if (options.gpuLayers !== undefined && options.gpuLayers > 0) {
    throw new InferenceError("UNSUPPORTED", "backend wasm runs on the CPU only; gpuLayers must be 0 or -1", {
      details: { option: "gpuLayers" },
    });
  }
}
