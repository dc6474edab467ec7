import {
  hasMethods,
  isAttentionInspector,
  isEmbeddingModel,
  isKVSnapshotModel,
  isTokenizerModel,
  type TextModel,
} from "./model.js";

export const CAPABILITY_IDS = [
  "generate",
  "chat",
  "classify",
  "batch.generate",
  "tokenizer",
  "chat.template",
  "embeddings",
  "grammar",
  "speculative",
  "lora.inference",
  "lora.training",
  "probe.logits",
  "probe.attention",
  "kv.snapshot",
] as const;

export type CapabilityId = (typeof CAPABILITY_IDS)[number];
export type CapabilityStatus = "supported" | "experimental" | "planned" | "unsupported";
export type CapabilityReport = Record<CapabilityId, CapabilityStatus>;

/**
 * Models may also declare statuses that cannot be seen from their methods
 * (grammar, speculative decoding, LoRA at inference, logit probes).
 */
export interface CapabilityDeclaration {
  readonly capabilities?: Partial<Record<CapabilityId, CapabilityStatus>>;
}

/**
 * What a backend or a loaded model can do. For a model, each capability is
 * derived from the optional interfaces it implements, then refined by what it
 * declares; for a backend, its declaration is the answer. A backend is taken as
 * its declaration (all this reads of it), so this module needs nothing of the registry.
 */
export function capabilitiesOf(subject: CapabilityDeclaration | TextModel): CapabilityReport {
  const report = Object.fromEntries(CAPABILITY_IDS.map((id) => [id, "unsupported"])) as CapabilityReport;
  if (isModel(subject)) {
    const derived: Partial<CapabilityReport> = {
      generate: "supported",
      chat: "supported",
      classify: "supported",
      "batch.generate": "supported",
      tokenizer: isTokenizerModel(subject) ? "supported" : "unsupported",
      "chat.template": isTokenizerModel(subject) ? "supported" : "unsupported",
      embeddings: isEmbeddingModel(subject) ? "supported" : "unsupported",
      "lora.training": hasMethods(subject, ["applyLoRA", "trainStep"]) ? "supported" : "unsupported",
      "probe.attention": isAttentionInspector(subject) ? "supported" : "unsupported",
      "kv.snapshot": isKVSnapshotModel(subject) ? "supported" : "unsupported",
    };
    Object.assign(report, derived);
  }
  const declared = (subject as CapabilityDeclaration).capabilities;
  if (declared) Object.assign(report, declared);
  return report;
}

/** The ids whose status is "supported". */
export function supportedCapabilities(subject: CapabilityDeclaration | TextModel): CapabilityId[] {
  const report = capabilitiesOf(subject);
  return CAPABILITY_IDS.filter((id) => report[id] === "supported");
}

function isModel(subject: CapabilityDeclaration | TextModel): subject is TextModel {
  return hasMethods(subject, ["generate", "chat", "classify", "batchGenerate", "info"]);
}
