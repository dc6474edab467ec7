import { capabilitiesOf } from "./capabilities.js";
import { InferenceError } from "./errors.js";
import { type EmbeddingModel, isEmbeddingModel, isTokenizerModel, type TextModel, type TokenizerModel } from "./model.js";
import { isProbedModel, type ProbedModel, type ProbeSink } from "./probes.js";
import type { ModelService } from "./service.js";
import type { GenerateMetrics, ModelInfo } from "./types.js";

/**
 * A `TextModel` that is the service's model `name`: each call holds the model
 * (loading it again if the service unloaded it) and lets it go when done, so
 * a server can be handed these instead of loaded models. It is shaped after
 * the model as first loaded here: the tokenizer and embeddings are there only
 * when that model has them.
 */
export async function servedModel(service: ModelService, name: string): Promise<TextModel> {
  let last: TextModel | undefined;
  let lastError: Error | undefined;
  const shape = await service.use(name, async (model) => ({
    model: (last = model),
    modelType: model.modelType,
    backend: model.backend,
    info: model.info(),
    capabilities: capabilitiesOf(model),
    tokenizer: isTokenizerModel(model),
    embeddings: isEmbeddingModel(model),
    probed: isProbedModel(model),
  }));
  // Sinks stay attached across unloads: each model the service loads for this name gets them on its first call here.
  const sinks = new Map<ProbeSink, Map<TextModel, () => void>>();
  const bind = (model: TextModel): TextModel => {
    if (!isProbedModel(model)) return model;
    for (const [sink, detachers] of sinks) if (!detachers.has(model)) detachers.set(model, model.attachProbe(sink));
    return model;
  };

  const run = async <T>(fn: (model: TextModel) => Promise<T>): Promise<T> => {
    try {
      const result = await service.use(name, (model) => {
        last = bind(model);
        return fn(model);
      });
      lastError = undefined;
      return result;
    } catch (error) {
      lastError = error as Error;
      throw error;
    }
  };
  async function* stream<T>(open: (model: TextModel) => AsyncIterable<T>): AsyncGenerator<T> {
    const lease = await service.acquire(name);
    last = bind(lease.model);
    try {
      yield* open(lease.model);
      lastError = undefined;
    } catch (error) {
      lastError = error as Error;
      throw error;
    } finally {
      lease.release();
    }
  }
  /** Synchronous calls (the tokenizer) cannot wait for a load: they need the model loaded now. */
  const loadedNow = (): TextModel => {
    const state = service.status().find((s) => s.name === name)?.state;
    if (state !== "loaded" || last === undefined) {
      throw new InferenceError("CLOSED", `model '${name}' is not loaded right now (the service unloaded it); any generating call loads it again`);
    }
    return last;
  };

  const model: TextModel & Record<string, unknown> = {
    modelType: shape.modelType,
    backend: shape.backend,
    capabilities: shape.capabilities,
    generate: (prompt, options) => stream((m) => m.generate(prompt, options)),
    chat: (messages, options) => stream((m) => m.chat(messages, options)),
    generateText: (prompt, options) => run((m) => m.generateText(prompt, options)),
    chatText: (messages, options) => run((m) => m.chatText(messages, options)),
    classify: (prompts, options) => run((m) => m.classify(prompts, options)),
    batchGenerate: (prompts, options) => run((m) => m.batchGenerate(prompts, options)),
    info: (): ModelInfo => (last && service.status().find((s) => s.name === name)?.state === "loaded" ? last.info() : shape.info),
    metrics: (): GenerateMetrics => loadedOrLast().metrics(),
    err: () => lastError,
    // The service owns the model: closing this view unloads it when idle.
    close: async () => void (await service.unload(name).catch(() => false)),
    [Symbol.asyncDispose]: async () => void (await service.unload(name).catch(() => false)),
  };
  const loadedOrLast = (): TextModel => {
    if (last === undefined) throw new InferenceError("CLOSED", `model '${name}' has not run a call yet`);
    return last;
  };
  if (shape.tokenizer) {
    const tokenizer = (): TokenizerModel => loadedNow() as TextModel & TokenizerModel;
    const methods: TokenizerModel = {
      encode: (text, options) => tokenizer().encode(text, options),
      decode: (ids, options) => tokenizer().decode(ids, options),
      applyChatTemplate: (messages, options) => tokenizer().applyChatTemplate(messages, options),
    };
    Object.assign(model, methods);
  }
  if (shape.probed) {
    const probed: ProbedModel = {
      attachProbe(sink) {
        sinks.set(sink, new Map());
        if (last) bind(last);
        return () => {
          for (const detach of sinks.get(sink)?.values() ?? []) detach();
          sinks.delete(sink);
        };
      },
    };
    Object.assign(model, probed);
  }
  if (shape.embeddings) {
    const embed: EmbeddingModel["embed"] = (texts, options) => run((m) => (m as TextModel & EmbeddingModel).embed(texts, options));
    model.embed = embed;
  }
  return model;
}
