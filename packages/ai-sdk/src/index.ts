// @infer/ai-sdk: a Vercel AI SDK (LanguageModelV3) provider running infer models in-process.
export { createInfer, infer, type InferProvider, type InferProviderSettings } from "./provider.js";
export { InferLanguageModel, type InferModelSettings, type PromptMode } from "./language-model.js";
export { toMessages, toPlainPrompt } from "./prompt.js";
