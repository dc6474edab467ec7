import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { contextLengthWarnings, InferenceError, type LoadOptions, ProbeBus, type ModelInfo, validateLoadOptions } from "@infer/core";
import { describeQuantization, elementCount } from "@infer/formats";
import type { Llama, LlamaContext, LlamaContextOptions, LlamaModel } from "node-llama-cpp";
import { byteFallbackGuard } from "./byte-fallback.js";
import { defaultThreads } from "./choice.js";
import { createDraftPredictor } from "./draft-predictor.js";
import { assertAdapterMetadata, assertGgufFile } from "./gguf.js";
import { assertContextFits, assertKvTypeFits } from "./memory.js";
import { IsolatedLlamaCppModel, loadIsolatedLlamaCppModel } from "./isolate-model.js";
import { stateLayoutOf } from "./kv-state-shape.js";
import { LlamaCppModel } from "./model.js";
import { assertLlamaCppCanRead } from "./validate.js";
import { asLlamaTokens, getRuntime, nodeLlamaCpp, withLlamaLog } from "./runtime.js";

const DEFAULT_PARALLEL_SLOTS = 4;
/** llama.cpp's positions and cell counts are 32-bit signed. */
const MAX_CONTEXT_CELLS = 2 ** 31 - 1;
const KV_CACHE_TYPES = { f32: "F32", f16: "F16", q8_0: "Q8_0" } as const;

/**
 * Loads a GGUF model, its context (one sequence per slot) and the optional LoRA
 * adapter and draft model; with `isolate`, all that in a child process of its own.
 */
export async function loadLlamaCppModel(path: string, options: LoadOptions = {}): Promise<LlamaCppModel | IsolatedLlamaCppModel> {
  validateLoadOptions(options);
  if (options.isolate === true) return loadIsolatedLlamaCppModel(path, options);
  if (options.quantize !== undefined) {
    throw new InferenceError(
      "UNSUPPORTED",
      "load option 'quantize' is not supported by backend llama_cpp: it runs GGUF weights as stored; " +
        "quantize the file with llama.cpp's llama-quantize instead",
      { details: { option: "quantize" } },
    );
  }
  await assertGgufFile(path);
  if (options.adapterPath !== undefined) await assertAdapter(options.adapterPath);
  if (options.draftModel !== undefined) await assertGgufFile(options.draftModel, "draft model");
  const headers = await assertLlamaCppCanRead(path, options);
  const textGuard = byteFallbackGuard(headers.model);
  if (headers.draft) byteFallbackGuard(headers.draft);

  // llama.cpp keeps the cell count in 32 bits; past that it would wrap, not fail.
  if ((options.contextLength ?? 0) * (options.parallelSlots ?? DEFAULT_PARALLEL_SLOTS) > MAX_CONTEXT_CELLS) {
    throw new InferenceError(
      "INVALID_OPTION",
      `load options contextLength (${options.contextLength}) x parallelSlots (${options.parallelSlots ?? DEFAULT_PARALLEL_SLOTS}) ` +
        `exceed llama.cpp's limit of ${MAX_CONTEXT_CELLS} context cells`,
      { details: { option: "contextLength" } },
    );
  }

  const llama = await getRuntime();
  const threads = options.threads ?? defaultThreads(llama.cpuMathCores);
  const slots = options.parallelSlots ?? DEFAULT_PARALLEL_SLOTS;
  const disposers: (() => Promise<void>)[] = [];
  try {
    const model = await loadWeights(llama, path, options.gpuLayers, "model");
    disposers.push(() => model.dispose());
    assertKvTypeFits(model, options.kvType);
    await assertContextFits(llama, model, options.contextLength, slots, options.kvType);
    const contextOptions: LlamaContextOptions = {
      contextSize: options.contextLength ?? automaticContext(model.trainContextSize),
      sequences: slots,
      threads: { ideal: threads, min: threads },
      ...(options.kvType !== undefined && {
        experimentalKvCacheKeyType: KV_CACHE_TYPES[options.kvType.toLowerCase() as keyof typeof KV_CACHE_TYPES],
        experimentalKvCacheValueType: KV_CACHE_TYPES[options.kvType.toLowerCase() as keyof typeof KV_CACHE_TYPES],
      }),
      ...(options.adapterPath !== undefined && { lora: { adapters: [{ filePath: options.adapterPath }] } }),
      ...(options.batchSize !== undefined && { batchSize: options.batchSize }),
    };
    const context = await createContext(model, contextOptions, options);
    disposers.push(() => context.dispose());

    let draft: { model: LlamaModel; context: LlamaContext } | undefined;
    if (options.draftModel !== undefined) {
      const draftModel = await loadWeights(llama, options.draftModel, options.gpuLayers, "draft model");
      disposers.push(() => draftModel.dispose());
      assertSameVocabulary(model, draftModel, options.draftModel);
      const draftContext = await createContext(
        draftModel,
        { contextSize: context.contextSize, sequences: slots, threads: { ideal: threads, min: threads }, batchSize: context.batchSize },
        options,
      );
      disposers.push(() => draftContext.dispose());
      draft = { model: draftModel, context: draftContext };
    }

    const library = await nodeLlamaCpp();
    const sequences = [];
    for (let i = 0; i < slots; i++) {
      sequences.push(
        draft
          ? context.getSequence({ tokenPredictor: createDraftPredictor(library, draft.context.getSequence()) })
          : context.getSequence(),
      );
    }
    return new LlamaCppModel({
      path,
      llama,
      model,
      context,
      slots: sequences,
      // node-llama-cpp keeps each sequence's tokens with its KV cells: no copies, so no budget but "off".
      reusePrefixes: options.promptCacheBytes !== 0,
      kvType: options.kvType?.toLowerCase() ?? "f16",
      draft,
      threads,
      info: modelInfo(model, context.contextSize, options.contextLength === undefined),
      probe: new ProbeBus(options.probe),
      ...(textGuard && { textGuard }),
      stateLayout: stateLayoutOf(headers.model, context.contextSize),
    });
  } catch (error) {
    for (const dispose of disposers.reverse()) await dispose().catch(() => undefined);
    throw error;
  }
}

/** How many token texts are compared between a model and its draft. */
const VOCAB_SAMPLES = 64;

/**
 * A draft proposes token ids the target then verifies, so both must number the
 * same vocabulary alike: same kind, size, BOS/EOS and token texts (sampled
 * across the vocabulary). A mismatch would feed llama.cpp out-of-range ids.
 */
function assertSameVocabulary(model: LlamaModel, draft: LlamaModel, draftPath: string): void {
  const sizeOf = (m: LlamaModel) => {
    let count = 0;
    for (const _ of m.iterateAllTokens()) count++;
    return count;
  };
  const size = sizeOf(model);
  const draftSize = sizeOf(draft);
  const problems: string[] = [];
  if (model.vocabularyType !== draft.vocabularyType) {
    problems.push(`tokenizer ${draft.vocabularyType} vs the model's ${model.vocabularyType}`);
  }
  if (size !== draftSize) problems.push(`${draftSize} tokens vs the model's ${size}`);
  if (model.tokens.bos !== draft.tokens.bos || model.tokens.eos !== draft.tokens.eos) problems.push("different BOS/EOS ids");
  if (problems.length === 0) {
    for (let i = 0; i < VOCAB_SAMPLES; i++) {
      const id = Math.floor((i * (size - 1)) / (VOCAB_SAMPLES - 1));
      const token = asLlamaTokens([id]);
      if (model.detokenize(token, true) !== draft.detokenize(token, true)) {
        problems.push(`token ${id} differs`);
        break;
      }
    }
  }
  if (problems.length > 0) {
    throw new InferenceError(
      "INVALID_OPTION",
      `load option draftModel '${draftPath}' does not share the model's vocabulary (${problems.join(", ")})`,
      { details: { option: "draftModel", path: draftPath } },
    );
  }
}

/** -1 = every layer on the GPU, 0 = CPU only, n = that many; unset = as many as fit (node-llama-cpp's "auto"). */
async function loadWeights(llama: Llama, path: string, gpuLayers: number | undefined, what: string): Promise<LlamaModel> {
  try {
    return await withLlamaLog(() =>
      llama.loadModel({
        modelPath: path,
        gpuLayers: gpuLayers === undefined ? "auto" : gpuLayers === -1 ? (llama.gpu ? "max" : 0) : gpuLayers,
      }),
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (/InsufficientMemory|too large|VRAM/i.test(message) || isInsufficientMemory(error)) {
      throw new InferenceError("INVALID_OPTION", `${what} '${path}' does not fit in memory with gpuLayers=${gpuLayers}: ${message}`, {
        cause: error,
        details: { path, gpuLayers },
      });
    }
    throw new InferenceError("MODEL_FORMAT", `llama.cpp could not load ${what} '${path}': ${message}`, {
      cause: error,
      details: { path },
    });
  }
}

async function createContext(model: LlamaModel, contextOptions: LlamaContextOptions, options: LoadOptions): Promise<LlamaContext> {
  try {
    return await withLlamaLog(() => model.createContext(contextOptions));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (isInsufficientMemory(error)) {
      throw new InferenceError(
        "CONTEXT_OVERFLOW",
        `a context of ${options.contextLength ?? "auto"} tokens x ${contextOptions.sequences} sequences does not fit in ` +
          `memory (${message}); lower contextLength or parallelSlots`,
        { cause: error, details: { contextLength: options.contextLength, parallelSlots: contextOptions.sequences } },
      );
    }
    if (options.adapterPath !== undefined && /lora|adapter/i.test(message)) {
      throw new InferenceError("MODEL_FORMAT", `llama.cpp could not apply the LoRA adapter '${options.adapterPath}': ${message}`, {
        cause: error,
        details: { path: options.adapterPath },
      });
    }
    throw new InferenceError("INTERNAL", `llama.cpp could not create a context: ${message}`, { cause: error });
  }
}

function isInsufficientMemory(error: unknown): boolean {
  return error instanceof Error && (error.name === "InsufficientMemoryError" || error.constructor.name === "InsufficientMemoryError");
}

/**
 * A LoRA adapter must be a GGUF file. A PEFT folder is recognised and refused
 * with a pointer to conversion, since llama.cpp reads GGUF adapters only.
 */
async function assertAdapter(path: string): Promise<void> {
  let isDirectory = false;
  try {
    isDirectory = (await stat(path)).isDirectory();
  } catch (error) {
    throw new InferenceError("MODEL_NOT_FOUND", `no LoRA adapter at '${path}'`, { cause: error, details: { path } });
  }
  if (isDirectory) {
    const entries = await readdir(path).catch(() => [] as string[]);
    if (entries.includes("adapter_config.json")) {
      throw new InferenceError(
        "UNSUPPORTED",
        `LoRA adapter '${path}' is a PEFT folder (adapter_config.json); backend llama_cpp reads GGUF adapters only ` +
          "(convert it with `infer convert-lora <peft-folder> <out.gguf>`, or load the folder on backend wasm)",
        { details: { path: join(path, "adapter_config.json") } },
      );
    }
    throw new InferenceError("MODEL_FORMAT", `LoRA adapter '${path}' is a folder, not a GGUF adapter file`, {
      details: { path },
    });
  }
  await assertGgufFile(path, "LoRA adapter");
  await assertAdapterMetadata(path);
}

/**
 * The most tokens an automatic context (no LoadOptions.contextLength) is sized
 * for. node-llama-cpp's "auto" grows the context toward the file's trained
 * context_length as far as memory allows, so a corrupt or absurd value (2^31-1)
 * would claim gigabytes of KV cache for the smallest model; no automatic
 * context needs more than this, and an explicit contextLength still may.
 */
export const AUTO_CONTEXT_MAX = 2 ** 18;

function automaticContext(trained: number): LlamaContextOptions["contextSize"] {
  return trained > AUTO_CONTEXT_MAX ? { max: AUTO_CONTEXT_MAX } : "auto";
}

function modelInfo(model: LlamaModel, contextLength: number, automatic: boolean): ModelInfo {
  const metadata = model.fileInfo.metadata as unknown as Record<string, Record<string, unknown> | undefined>;
  const architecture = String(metadata.general?.architecture ?? model.fileInfo.metadata.general.architecture);
  const archFields = metadata[architecture] ?? {};
  const tensors = model.fileInfo.tensorInfo;
  const quant = describeQuantization(metadata.general?.file_type, tensors);
  let vocabSize = 0;
  for (const _ of model.iterateAllTokens()) vocabSize++;
  return {
    architecture,
    vocabSize,
    numLayers: Number(archFields.block_count ?? model.fileInsights.totalLayers - 1),
    hiddenSize: Number(archFields.embedding_length ?? model.embeddingVectorSize),
    contextLength,
    quantBits: quant.bits,
    quantGroup: quant.group,
    format: "gguf",
    ...(tensors && { parameters: tensors.reduce((sum, t) => sum + elementCount(t), 0) }),
    trainedContextLength: model.trainContextSize,
    // llama.cpp itself only logs this (at a level the runtime keeps quiet); the contract reports it.
    warnings: [
      ...contextLengthWarnings(contextLength, model.trainContextSize),
      ...(automatic && model.trainContextSize > AUTO_CONTEXT_MAX
        ? [
            `the automatic context is capped at ${AUTO_CONTEXT_MAX} of the ${model.trainContextSize} tokens the model claims to be ` +
              "trained for; pass contextLength for more",
          ]
        : []),
    ],
  };
}
