/** loadTransformer: a GGUF file or a Hugging Face folder (a path, a URL, a Blob, bytes) to a ready Transformer. */
import { InferenceError, isInferenceError, type ModelBlob, type ModelSource, sourceKind, sourcePath } from "@infer/core";
import { GgmlType, type GgufFile, GgufValueType, describeTensorType, hasGgufMagic, parseGguf } from "@infer/formats";
import { platform } from "#platform";
import type { Kernels, WeightMatrix } from "../kernels/types.js";
import { findArchitecture } from "../arch/registry.js";
import { ConfigReader, type ModelConfig } from "../engine/config.js";
import { WeightSource, type StoredTensor, type WeightOptions } from "../engine/weights.js";
import { Transformer, type LoadedModel } from "../engine/transformer.js";
import type { BufferAllocator } from "../platform/types.js";
import { blobSource, memorySource, urlSource, type ByteSource } from "../sources/byte-source.js";
import { cachedModel, storeModel } from "../sources/cache.js";
import type { ProgressListener } from "../sources/download.js";
import { pathFolder, urlFolder, type ModelFolder } from "../sources/folder.js";
import { folderUrlOf } from "../sources/model-url.js";
import { openHfFolder, type HfFolder } from "./load-hf.js";

export interface LoadOptions {
  /** Kernels the forward pass runs on; default the reference kernels. */
  kernels?: Kernels;
  /** Re-encode floating-point weight matrices (F32, F16, BF16) in this type once, at load. */
  quantize?: GgmlType;
  /** Download and load progress (see @infer/core's LoadOptions.onProgress). */
  onProgress?: ProgressListener;
  /** Stops a download. */
  signal?: AbortSignal;
  /** Keep a downloaded model (a GGUF file, or a folder by URL) in the browser's Origin Private File System and load it from there next time (default true; no effect without OPFS). */
  cache?: boolean;
}

export type LoadedMetadata =
  | { format: "gguf"; gguf: GgufFile }
  | { format: "safetensors"; folder: ModelFolder; config: Record<string, unknown> };

export interface LoadedTransformer {
  transformer: Transformer;
  format: "gguf" | "safetensors";
  /** Bits per weight of the dominant matrix type (32 F32, 16 F16/BF16, 8 Q8_0, 4 Q4_K, ...). */
  quantBits: number;
  /** Block size of the dominant matrix type; 0 for unquantized floats. */
  quantGroup: number;
  metadata: LoadedMetadata;
  /** The weight matrices the blocks hold, by GGUF-style name ("blk.0.attn_q.weight"): where adapters attach. */
  matrices: ReadonlyMap<string, WeightMatrix>;
}

/** A GGUF file ready to read, wherever it is. */
interface GgufInput {
  label: string;
  read(memory: { allocate?: BufferAllocator; release?: (view: Uint8Array) => void }): Promise<GgufFile>;
}

/**
 * Loads a .gguf file, or a folder (or a file in it) with config.json and *.safetensors: from a
 * path, an http(s) URL (a folder's URL ends with "/" or names config.json or a .safetensors file),
 * a Blob or bytes (GGUF only: one file).
 */
export async function loadTransformer(source: ModelSource, options: LoadOptions = {}): Promise<LoadedTransformer> {
  const input = await resolveInput(source, options);
  // Kernel memory taken for this model, handed back if loading fails part-way.
  const held: Uint8Array[] = [];
  try {
    if ("read" in input) return await loadGguf(input, options, held);
    return await loadHf(input, options, held);
  } catch (error) {
    for (const view of held) options.kernels?.release?.(view);
    throw error;
  }
}

async function resolveInput(source: ModelSource, options: LoadOptions): Promise<GgufInput | ModelFolder> {
  const { onProgress, signal } = options;
  const kind = sourceKind(source);
  if (kind === "path") return resolvePath(sourcePath(source as string | URL), onProgress);
  if (kind === "url") {
    const url = new URL(String(source));
    const folder = folderUrlOf(url.href);
    if (folder !== undefined) return urlFolder(folder, { onProgress, signal, cache: options.cache });
    if (options.cache === false) return byteInput(await urlSource(url.href, onProgress, signal));
    const cached = await cachedModel(url.href);
    if (cached) return byteInput(await blobSource(cached, onProgress, url.href));
    return byteInput(await urlSource(url.href, onProgress, signal), (bytes) => storeModel(url.href, bytes));
  }
  if (kind === "blob") return byteInput(await blobSource(source as ModelBlob, onProgress));
  return byteInput(memorySource(source as ArrayBuffer | ArrayBufferView, onProgress));
}

async function resolvePath(path: string, onProgress: ProgressListener | undefined): Promise<GgufInput | ModelFolder> {
  const info = await platform.files.stat(path);
  if (info === undefined) throw new InferenceError("MODEL_NOT_FOUND", `${path}: no such model file or folder`, { details: { file: path } });
  if (info.isDirectory) return pathFolder(path);
  if (path.endsWith(".safetensors") || path.endsWith("config.json")) return pathFolder(platform.files.dirname(path));
  return {
    label: path,
    async read(memory) {
      onProgress?.({ phase: "load", loadedBytes: 0, totalBytes: info.size });
      const gguf = await platform.files.readGguf(path, memory);
      onProgress?.({ phase: "load", loadedBytes: info.size, totalBytes: info.size });
      return gguf;
    },
  };
}

/**
 * A GGUF from bytes streamed in: checked by its first bytes, then read whole into the kernels'
 * memory; `parsed` sees the bytes of a file that parsed (to cache it).
 */
function byteInput(source: ByteSource, parsed?: (bytes: Uint8Array) => Promise<unknown>): GgufInput {
  if (!hasGgufMagic(source.head)) {
    source.cancel?.();
    const shown = [...source.head.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    throw new InferenceError("MODEL_FORMAT", `${source.label}: not a GGUF file (expected "GGUF" at the start, found bytes ${shown || "none"})`, {
      details: { file: source.label, field: "magic" },
    });
  }
  return {
    label: source.label,
    // The header stays in the kernels' memory beside the tensors (a few MiB): the bytes arrive once, in order.
    async read({ allocate, release }) {
      const gguf = parseGguf(await source.readAll(allocate, release), source.label);
      await parsed?.(gguf.bytes);
      return gguf;
    },
  };
}

/**
 * Where model files are read to. Kernels with their own memory get the file
 * bytes there, so every tensor view already lives where matmul reads it (one
 * copy of the weights in all). When weights are re-encoded at load the file is
 * only a source: it goes to ordinary memory, collected after loading.
 */
function fileMemory(options: LoadOptions, held: Uint8Array[], path: string): BufferAllocator | undefined {
  const allocate = kernelFileMemory(options, path)?.allocate;
  if (!allocate) return undefined;
  return (byteLength) => {
    const view = allocate(byteLength);
    held.push(view);
    return view;
  };
}

/** fileMemory's allocator without the bookkeeping, and the kernels' release if they have one: for reads that hand memory back themselves. */
function kernelFileMemory(
  options: LoadOptions,
  path: string,
): { allocate: BufferAllocator; release?: (view: Uint8Array) => void } | undefined {
  const kernels = options.kernels;
  if (options.quantize !== undefined || !kernels?.allocate) return undefined;
  const allocate = (byteLength: number): Uint8Array => {
    try {
      return kernels.allocate!(byteLength, 64);
    } catch (error) {
      if (!isInferenceError(error, "UNSUPPORTED")) throw error;
      // The kernels' 32-bit memory cannot hold the file: say which file, and what still runs it.
      throw new InferenceError(
        "UNSUPPORTED",
        `${path}: ${byteLength} bytes do not fit the WebAssembly kernels' memory (at most 4 GiB with everything else); ` +
          "the reference kernels (INFER_WASM_KERNELS=reference) have no such limit but are far slower",
        { cause: error, details: { file: path, bytes: byteLength } },
      );
    }
  };
  const release = kernels.release;
  return { allocate, release: release ? (view) => release.call(kernels, view) : undefined };
}

function weightOptions(options: LoadOptions, held: Uint8Array[]): WeightOptions {
  const kernels = options.kernels;
  return {
    quantize: options.quantize,
    prepare: kernels?.prepareMatrix ? (w) => kernels.prepareMatrix!(w) : undefined,
    allocate: kernels?.allocate
      ? (byteLength) => {
          const view = kernels.allocate!(byteLength, 64);
          held.push(view);
          return view;
        }
      : undefined,
  };
}

async function loadGguf(input: GgufInput, options: LoadOptions, held: Uint8Array[]): Promise<LoadedTransformer> {
  const path = input.label;
  // In the kernels' memory only the tensor data stays (from a file: the header is read there, parsed and handed back first).
  const memory = kernelFileMemory(options, path);
  const gguf = await input.read(memory ?? {});
  if (memory) held.push(gguf.bytes);
  refuseSplitGguf(gguf, path);
  const archValue = gguf.metadata.get("general.architecture");
  const archName = archValue?.type === GgufValueType.STRING ? archValue.value : "";
  const architecture = findArchitecture("gguf", archName ? [archName] : [], path);

  const tensors = new Map<string, StoredTensor>();
  for (const info of gguf.tensors) {
    // ggml lists the innermost dimension first; the engine uses row-major [rows, cols].
    tensors.set(info.name, { shape: [...info.shape].reverse(), type: info.type, data: gguf.tensorData(info) });
  }
  const reader = ConfigReader.fromGguf(path, gguf.metadata, archName, ggufPlainValue);
  reader.vocabFallback = tensors.get("token_embd.weight")?.shape[0];
  const config = architecture.readConfig(reader);
  const source = new WeightSource(path, "gguf", tensors, undefined, weightOptions(options, held));
  const model = architecture.load(source, config);
  return finish(config, model, source, options, { format: "gguf", gguf }, held);
}

async function loadHf(folder: ModelFolder, options: LoadOptions, held: Uint8Array[]): Promise<LoadedTransformer> {
  const hf: HfFolder = await openHfFolder(folder, fileMemory(options, held, folder.label));
  const configFile = folder.pathOf("config.json");
  const names = [hf.config.model_type, ...(Array.isArray(hf.config.architectures) ? hf.config.architectures : [])]
    .filter((name): name is string => typeof name === "string");
  const architecture = findArchitecture("safetensors", names, configFile);
  const config = architecture.readConfig(ConfigReader.fromHf(configFile, hf.config));
  const wrapped = multimodalNames(hf.tensors);
  const source = new WeightSource(
    folder.label,
    "safetensors",
    hf.tensors,
    (name) => wrapped(architecture.hfTensorName(name)),
    weightOptions(options, held),
  );
  const model = architecture.load(source, config);
  return finish(config, model, source, options, { format: "safetensors", folder, config: hf.config }, held);
}

/**
 * Multimodal checkpoints (e.g. Gemma 3 4B+) keep the language model under a
 * prefix: "language_model.model.…" / "language_model.lm_head.weight" (older
 * transformers) or "model.language_model.…" with "lm_head.weight" (newer).
 */
function multimodalNames(tensors: ReadonlyMap<string, unknown>): (name: string) => string {
  if (tensors.has("model.embed_tokens.weight")) return (name) => name;
  if (tensors.has("language_model.model.embed_tokens.weight")) return (name) => `language_model.${name}`;
  if (tensors.has("model.language_model.embed_tokens.weight")) {
    return (name) => (name.startsWith("model.") ? `model.language_model.${name.slice("model.".length)}` : name);
  }
  return (name) => name;
}

function finish(
  config: ModelConfig,
  model: LoadedModel,
  source: WeightSource,
  options: LoadOptions,
  metadata: LoadedMetadata,
  held: Uint8Array[],
): LoadedTransformer {
  const transformer = new Transformer(config, model, source.weightBytes, source.parameterCount, options.kernels, held);
  const quant = describeTensorType(dominantType(source.matrixElementsByType));
  source.release();
  return {
    transformer,
    format: metadata.format,
    quantBits: quant?.bits ?? 0,
    quantGroup: quant?.group ?? 0,
    metadata,
    matrices: source.matrices,
  };
}

function dominantType(elements: ReadonlyMap<GgmlType, number>): GgmlType {
  let best = GgmlType.F32;
  let most = -1;
  for (const [type, count] of elements) {
    if (count > most) {
      best = type;
      most = count;
    }
  }
  return best;
}

/**
 * One part of a split GGUF (llama.cpp's gguf-split) holds only some tensors: read as a whole model
 * it would fail later on a missing tensor, so it is refused up front with the way out.
 */
function refuseSplitGguf(gguf: GgufFile, path: string): void {
  const count = ggufPlainValue(gguf.metadata.get("split.count"));
  if ((typeof count === "number" || typeof count === "bigint") && Number(count) > 1) {
    throw new InferenceError(
      "UNSUPPORTED",
      `${path}: one part of a split GGUF (split.count = ${count}); the wasm backend loads single-file GGUF: ` +
        "merge the parts with llama.cpp's `llama-gguf-split --merge`, or load the first part with backend llama_cpp",
      { details: { file: path, field: "split.count" } },
    );
  }
}

/** A GGUF metadata value as a plain JS value (arrays as their item arrays). */
function ggufPlainValue(value: unknown): unknown {
  if (value && typeof value === "object" && "value" in value) return (value as { value: unknown }).value;
  return value;
}
