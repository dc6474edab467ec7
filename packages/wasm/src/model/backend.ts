import { totalmem } from "node:os";
import { type Backend, InferenceError, type LoadOptions, ProbeBus, type TextModel, validateLoadOptions } from "@infer/core";
import { detectFormat } from "@infer/core/node";
import { loadTransformer, type LoadedTransformer } from "../engine/transformer.js";
import { referenceKernels } from "../kernels/reference.js";
import type { Kernels } from "../kernels/types.js";
import { tokenizerFromGgufMetadata } from "../tokenizer/gguf-vocab.js";
import { loadHfTokenizer } from "../tokenizer/load.js";
import { WasmModel } from "./wasm-model.js";

/** Default sequence slots when `parallelSlots` is not given. */
const DEFAULT_SLOTS = 4;
/** Share of physical memory the default context may give the KV cache. */
const KV_MEMORY_SHARE = 1 / 8;
/** Most the default KV cache may take, whatever the machine. */
const KV_DEFAULT_CAP_BYTES = 4 * 2 ** 30;

export interface WasmLoadOptions extends LoadOptions {
  /** Kernels to run on (tests pass the reference kernels or a configured WASM pool). */
  kernels?: Kernels;
}

export const wasmBackend: Backend = {
  name: "wasm",
  capabilities: {
    generate: "supported",
    chat: "supported",
    classify: "supported",
    "batch.generate": "supported",
    tokenizer: "supported",
    "chat.template": "supported",
    "probe.logits": "supported",
    "lora.inference": "planned",
    "lora.training": "planned",
  },
  available: () => "WebAssembly" in globalThis,
  unavailableReason: () => "this JavaScript runtime has no WebAssembly",
  async canLoad(path: string): Promise<boolean> {
    const format = await detectFormat(path);
    return format === "gguf" || format === "safetensors";
  },
  loadModel: (path: string, options?: LoadOptions) => loadWasmModel(path, options),
};

/** Loads a GGUF file or a Hugging Face folder on our engine. */
export async function loadWasmModel(path: string, options: WasmLoadOptions = {}): Promise<TextModel> {
  const { kernels, ...loadOptions } = options;
  validateLoadOptions(loadOptions);
  rejectUnsupported(loadOptions);
  const loaded = await loadTransformer(path, { kernels: kernels ?? referenceKernels });
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
  const contextLength = chooseContextLength(loaded, parallelSlots, loadOptions.contextLength);
  return new WasmModel({
    transformer: loaded.transformer,
    tokenizer,
    contextLength,
    parallelSlots,
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
    },
    dispose: async () => {
      if (kernels === undefined) return;
      await kernels.dispose?.();
    },
  });
}

/** Bytes of keys and values one position takes across all layers (F32 cache). */
function kvBytesPerPosition(loaded: LoadedTransformer): number {
  const { numLayers, numKVHeads, headDim } = loaded.transformer.config;
  return numLayers * 2 * numKVHeads * headDim * 4;
}

/**
 * The model's trained context unless asked otherwise, capped so the default KV
 * cache stays a modest share of memory; an explicit request that cannot fit in
 * memory fails before anything is allocated.
 */
function chooseContextLength(loaded: LoadedTransformer, slots: number, requested: number | undefined): number {
  const perPosition = kvBytesPerPosition(loaded) * slots;
  if (requested !== undefined) {
    const needed = perPosition * requested;
    if (needed > totalmem() * 0.75) {
      throw new InferenceError(
        "INVALID_OPTION",
        `contextLength ${requested} with ${slots} slots needs ${gib(needed)} GiB of KV cache; this machine has ${gib(totalmem())} GiB`,
        { details: { option: "contextLength", value: requested } },
      );
    }
    return requested;
  }
  const budget = Math.min(KV_DEFAULT_CAP_BYTES, totalmem() * KV_MEMORY_SHARE);
  const fits = Math.max(256, Math.floor(budget / perPosition));
  return Math.min(loaded.transformer.config.contextLength, fits);
}

function gib(bytes: number): string {
  return (bytes / 2 ** 30).toFixed(1);
}

function rejectUnsupported(options: LoadOptions): void {
  if (options.adapterPath !== undefined) {
    throw new InferenceError("UNSUPPORTED", "backend wasm cannot apply LoRA adapters yet (adapterPath)", {
      details: { option: "adapterPath" },
    });
  }
  if (options.draftModel !== undefined) {
    throw new InferenceError("UNSUPPORTED", "backend wasm has no speculative decoding (draftModel)", {
      details: { option: "draftModel" },
    });
  }
  for (const option of ["quantize", "kvType"] as const) {
    if (options[option] !== undefined) {
      throw new InferenceError("UNSUPPORTED", `backend wasm does not support ${option} yet`, { details: { option } });
    }
  }
  if (options.gpuLayers !== undefined && options.gpuLayers > 0) {
    throw new InferenceError("UNSUPPORTED", "backend wasm runs on the CPU only; gpuLayers must be 0 or -1", {
      details: { option: "gpuLayers" },
    });
  }
}
