import { type EmbeddingModelV3, NoSuchModelError, type ProviderV3 } from "@ai-sdk/provider";
import {
  createService,
  InferenceError,
  isEmbeddingModel,
  isHttpUrl,
  listBackends,
  loadModel,
  type LoadOptions,
  type ModelLease,
  type ModelService,
  type ModelSource,
  type ServiceEntry,
  type TextModel,
} from "@infer/core";
import { resolveModel, type ResolveOptions } from "@infer/hub";
import { InferLanguageModel, type InferModelSettings } from "./language-model.js";

export interface InferProviderSettings {
  /** Options for every `loadModel` (backend, contextLength, threads, ...). */
  load?: LoadOptions;
  /** How model ids are resolved and pulled (cache folder, hub endpoint, token). */
  hub?: ResolveOptions;
  /**
   * Models by id: an already loaded TextModel (used as is, left open by `close()`), or what to load
   * (a path, alias, `hf:` reference, URL, bytes, or a service entry). Models to load are served by a
   * model service the provider makes: loaded on first use, one load shared by concurrent calls,
   * unloaded after `idleUnloadMs` or to stay under `maxLoadedBytes`.
   */
  models?: Record<string, TextModel | ServiceEntry>;
  /** A model service whose names are the model ids (it stays open when the provider closes). */
  service?: ModelService;
  /** The service's memory budget for the models in `models` (see `createService`). */
  maxLoadedBytes?: number;
  /** The service unloads a model this long after its last call ends. */
  idleUnloadMs?: number;
  /** Backend packages imported when no backend is registered yet. */
  backendPackages?: string[];
}

export interface InferProvider extends ProviderV3 {
  /** A language model for a model id (a path, alias, `hf:` reference, or a service name) or an already loaded TextModel. */
  (model: string | TextModel, settings?: InferModelSettings): InferLanguageModel;
  languageModel(modelId: string, settings?: InferModelSettings): InferLanguageModel;
  /** Closes every model this provider loaded (models and services passed in stay open). */
  close(): Promise<void>;
}

const DEFAULT_BACKENDS = ["@infer/wasm", "@infer/llama-cpp", "@infer/remote"];

async function ensureBackends(packages: string[]): Promise<void> {
  if (listBackends().length > 0) return;
  for (const name of packages) await import(name).catch(() => undefined);
}

function isTextModel(value: TextModel | ServiceEntry): value is TextModel {
  return typeof value === "object" && value !== null && typeof (value as Partial<TextModel>).generate === "function";
}

type EntrySpec = Exclude<ServiceEntry, ModelSource>;

function specOf(entry: ServiceEntry): EntrySpec {
  return typeof entry === "object" && ("source" in entry || "load" in entry) ? (entry as EntrySpec) : { source: entry as ModelSource };
}

/** A model the caller owns: each call holds it and nothing ever unloads it. */
function held(model: TextModel): ModelLease {
  return { model, release: () => undefined };
}

/**
 * An AI SDK provider running infer models in this process. Without a service,
 * each model id is resolved (path, alias, hf: reference; pulled when missing),
 * loaded once and shared by every call that names it. With one (`service`, or
 * sources in `models`), the ids are the service's names: each call holds its
 * model for its duration, so the service may unload it between calls, and an
 * id the service does not know fails with its MODEL_NOT_FOUND rather than
 * loading outside the service's memory budget.
 */
export function createInfer(settings: InferProviderSettings = {}): InferProvider {
  const given = new Map<string, TextModel>();
  const toLoad: Record<string, ServiceEntry> = {};
  for (const [id, entry] of Object.entries(settings.models ?? {})) {
    if (isTextModel(entry)) given.set(id, entry);
    else toLoad[id] = entry;
  }
  const backends = () => ensureBackends(settings.backendPackages ?? DEFAULT_BACKENDS);
  /** A string source is resolved like any model id: aliases and `hf:` references are pulled into the cache. */
  const entryToLoad = (entry: ServiceEntry): ServiceEntry => {
    const { source, options, bytes, load } = specOf(entry);
    return {
      bytes,
      load: async () => {
        await backends();
        if (load) return load();
        const resolved = typeof source === "string" && !isHttpUrl(source) ? await resolveModel(source, settings.hub) : source!;
        return loadModel(resolved, { ...settings.load, ...options });
      },
    };
  };
  const names = Object.keys(toLoad);
  if (settings.service && names.length > 0) {
    throw new InferenceError("INVALID_OPTION", `models to load (${names.join(", ")}) and a service were both given; put them in the service`, {
      details: { option: "models" },
    });
  }
  const ownService =
    names.length > 0
      ? createService({
          models: Object.fromEntries(names.map((id) => [id, entryToLoad(toLoad[id]!)])),
          maxLoadedBytes: settings.maxLoadedBytes,
          idleUnloadMs: settings.idleUnloadMs,
        })
      : undefined;
  const service = settings.service ?? ownService;

  const loaded = new Map<string, Promise<TextModel>>();
  let anonymous = 0;
  const loadById = (id: string): Promise<TextModel> => {
    let pending = loaded.get(id);
    if (!pending) {
      pending = (async () => {
        await backends();
        return loadModel(await resolveModel(id, settings.hub), settings.load);
      })();
      pending.catch(() => loaded.delete(id)); // a failed load may be retried
      loaded.set(id, pending);
    }
    return pending;
  };

  const acquire = async (id: string): Promise<ModelLease> => {
    const model = given.get(id);
    if (model) return held(model);
    if (service) return service.acquire(id);
    return held(await loadById(id));
  };

  const languageModel = (model: string | TextModel, modelSettings?: InferModelSettings) => {
    if (typeof model !== "string") {
      const id = `${model.backend}:${model.modelType}#${++anonymous}`;
      return new InferLanguageModel(id, () => Promise.resolve(held(model)), modelSettings);
    }
    return new InferLanguageModel(model, () => acquire(model), modelSettings);
  };

  const embeddingModel = (modelId: string): EmbeddingModelV3 => ({
    specificationVersion: "v3",
    provider: "infer",
    modelId,
    maxEmbeddingsPerCall: undefined,
    supportsParallelCalls: false,
    async doEmbed({ values, abortSignal }) {
      const { model, release } = await acquire(modelId);
      try {
        if (!isEmbeddingModel(model)) {
          throw new NoSuchModelError({ modelId, modelType: "embeddingModel", message: `the model '${modelId}' (backend ${model.backend}) does not produce embeddings` });
        }
        const vectors = await model.embed(values, { signal: abortSignal });
        return { embeddings: vectors.map((v) => Array.from(v)), warnings: [] };
      } finally {
        release();
      }
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
      const models = await Promise.allSettled(loaded.values());
      loaded.clear();
      await Promise.all([...models.map((m) => (m.status === "fulfilled" ? m.value.close() : undefined)), ownService?.close()]);
    },
  });
  return provider as InferProvider;
}

/** The default provider: `generateText({ model: infer("./model.gguf"), prompt })`. */
export const infer = createInfer();
