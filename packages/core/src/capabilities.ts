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
 * How capability statuses are declared, once per backend:
 *
 * - A backend states every capability in one table (a `CapabilityReport`
 *   constant), which is both its `Backend.capabilities` and what each of its
 *   models declares. Options are part of what the table promises: a capability
 *   reached through a load option (speculative decoding with `draftModel`, LoRA
 *   with `adapterPath`) or a call option (`grammar`, `logprobs`) is "supported"
 *   when giving that option works, for the backend and each model alike.
 * - The capabilities in `MODEL_KIND_CAPABILITIES` hang on the kind of model
 *   loaded (one model has an embedding head, another does not), and a model
 *   shows them by implementing an optional interface. For these a backend's
 *   status means "its models of some kind"; a model of another kind reports
 *   "unsupported", however its backend's table reads. Every other capability
 *   a model reports exactly as its backend does.
 *
 * `capabilityMismatches` checks a model against its backend under this rule.
 */
export interface CapabilityDeclaration {
  readonly capabilities?: Partial<Record<CapabilityId, CapabilityStatus>>;
}

/** The capabilities a model has through an optional interface of its own, so models of one backend may differ. */
export const MODEL_KIND_CAPABILITIES: readonly CapabilityId[] = [
  "tokenizer",
  "chat.template",
  "embeddings",
  "lora.training",
  "probe.attention",
  "kv.snapshot",
];

/** Statuses that claim a capability works (a model must implement its interface to report one). */
const WORKING: ReadonlySet<CapabilityStatus> = new Set(["supported", "experimental"]);

/**
 * What a backend or a loaded model can do. For a backend, its declaration is
 * the answer (all this reads of it, so this module needs nothing of the
 * registry). For a model, each capability is derived from the optional
 * interfaces it implements, then refined by what it declares; a declaration
 * cannot claim a working capability whose interface the model lacks.
 */
export function capabilitiesOf(subject: CapabilityDeclaration | TextModel): CapabilityReport {
  const report = Object.fromEntries(CAPABILITY_IDS.map((id) => [id, "unsupported"])) as CapabilityReport;
  const declared = (subject as CapabilityDeclaration).capabilities ?? {};
  if (!isModel(subject)) return Object.assign(report, declared);
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
  for (const [id, status] of Object.entries(declared) as [CapabilityId, CapabilityStatus][]) {
    const lacksInterface = MODEL_KIND_CAPABILITIES.includes(id) && derived[id] === "unsupported";
    if (!(lacksInterface && WORKING.has(status))) report[id] = status;
  }
  return report;
}

/**
 * Where a model's report breaks the rule above against its backend's: one line
 * per capability that differs where it may not. Empty when they agree.
 */
export function capabilityMismatches(backend: CapabilityDeclaration & { readonly name: string }, model: TextModel): string[] {
  const ofBackend = capabilitiesOf(backend);
  const ofModel = capabilitiesOf(model);
  return CAPABILITY_IDS.filter((id) => {
    if (ofModel[id] === ofBackend[id]) return false;
    return !(MODEL_KIND_CAPABILITIES.includes(id) && ofModel[id] === "unsupported");
  }).map((id) => `${id}: backend ${backend.name} reports "${ofBackend[id]}", its ${model.modelType} model "${ofModel[id]}"`);
}

/** The ids whose status is "supported". */
export function supportedCapabilities(subject: CapabilityDeclaration | TextModel): CapabilityId[] {
  const report = capabilitiesOf(subject);
  return CAPABILITY_IDS.filter((id) => report[id] === "supported");
}

function isModel(subject: CapabilityDeclaration | TextModel): subject is TextModel {
  return hasMethods(subject, ["generate", "chat", "classify", "batchGenerate", "info"]);
}
