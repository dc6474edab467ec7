import { type EmbeddingModelV3, NoSuchModelError, type ProviderV3 } from "@ai-sdk/provider";
import { isEmbeddingModel, listBackends, loadModel, type LoadOptions, type TextModel } from "@infer/core";
import { resolveModel, type ResolveOptions } from "@infer/hub";
import { InferLanguageModel, type InferModelSettings } from "./language-model.js";

export interface InferProviderSettings {
  /** Options for every `loadModel` (backend, contextLength, threads, ...). */
  load?: LoadOptions;
  /** How model ids are resolved and pulled (cache folder, hub endpoint, token). */
  hub?: ResolveOptions;
  /** Already loaded models, by id; other ids are loaded on first use. */
  models?: Record<string, TextModel>;
  /** Backend packages imported when no backend is registered yet. */
  backendPackages?: string[];
}

export interface InferProvider extends ProviderV3 {
  /** A language model for a path, alias, `hf:` reference, or an already loaded TextModel. */
  (model: string | TextModel, settings?: InferModelSettings): InferLanguageModel;
  languageModel(modelId: string, settings?: InferModelSettings): InferLanguageModel;
  /** Closes every model this provider loaded (models passed in stay open). */
  close(): Promise<void>;
}

const DEFAULT_BACKENDS = ["@infer/wasm", "@infer/llama-cpp"];

async function ensureBackends(packages: string[]): Promise<void> {
  if (listBackends().length > 0) return;
  for (const name of packages) await import(name).catch(() => undefined);
}

/**
 * An AI SDK provider running infer models in this process: each model id is
 * resolved (path, alias, hf: reference; pulled when missing), loaded once and
 * shared by every call that names it.
 */
export function createInfer(settings: InferProviderSettings = {}): InferProvider {
  const loaded = new Map<string, Promise<TextModel>>();
  const owned = new Set<string>();
  let anonymous = 0;

  const modelFor = (id: string): Promise<TextModel> => {
    const given = settings.models?.[id];
    if (given) return Promise.resolve(given);
    let pending = loaded.get(id);
    if (!pending) {
      pending = (async () => {
        await ensureBackends(settings.backendPackages ?? DEFAULT_BACKENDS);
        return loadModel(await resolveModel(id, settings.hub), settings.load);
      })();
      pending.catch(() => loaded.delete(id)); // a failed load may be retried
      loaded.set(id, pending);
      owned.add(id);
    }
    return pending;
  };

  const languageModel = (model: string | TextModel, modelSettings?: InferModelSettings) => {
    if (typeof model !== "string") {
      const id = `${model.backend}:${model.modelType}#${++anonymous}`;
      return new InferLanguageModel(id, () => Promise.resolve(model), modelSettings);
    }
    return new InferLanguageModel(model, () => modelFor(model), modelSettings);
  };

  const embeddingModel = (modelId: string): EmbeddingModelV3 => ({
    specificationVersion: "v3",
    provider: "infer",
    modelId,
    maxEmbeddingsPerCall: undefined,
    supportsParallelCalls: false,
    async doEmbed({ values, abortSignal }) {
      const model = await modelFor(modelId);
      if (!isEmbeddingModel(model)) {
        throw new NoSuchModelError({ modelId, modelType: "embeddingModel", message: `the model '${modelId}' (backend ${model.backend}) does not produce embeddings` });
      }
      const vectors = await model.embed(values, { signal: abortSignal });
      return { embeddings: vectors.map((v) => Array.from(v)), warnings: [] };
    },
  });

  const provider = Object.assign(languageModel, {
    specificationVersion: "v3" as const,
    languageModel: (modelId: string, modelSettings?: InferModelSettings) => languageModel(modelId, modelSettings),
    embeddingModel,
    textEmbeddingModel: embeddingModel,
    imageModel: (modelId: string): never => {
      throw new NoSuchModelError({ modelId, modelType: "imageModel", message: "infer has no image models" });
    },
    async close() {
      const models = await Promise.allSettled([...owned].map((id) => loaded.get(id)).filter((p) => p !== undefined));
      loaded.clear();
      owned.clear();
      await Promise.all(models.map((m) => (m.status === "fulfilled" ? m.value.close() : undefined)));
    },
  });
  return provider as InferProvider;
}

/** The default provider: `generateText({ model: infer("./model.gguf"), prompt })`. */
export const infer = createInfer();
