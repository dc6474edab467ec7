import { type Backend, isServerUrl, register } from "@infer/core";
import { REMOTE_CAPABILITIES } from "./capabilities.js";
import { loadRemoteModel } from "./load.js";

export { RemoteModel } from "./model.js";
export { RemoteEmbeddingModel } from "./embedding-model.js";
export { loadRemoteModel } from "./load.js";
export { loadReplicas, ReplicatedModel, type ReplicaOptions, type ReplicaStatus } from "./replicas.js";
export { DIALECTS, DIALECT_FEATURES, type Dialect, type DialectFeatures, detectDialect } from "./dialect.js";
export { API_KEY_ENV, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, endpointOf } from "./endpoint.js";
export { REMOTE_CAPABILITIES } from "./capabilities.js";

/** Backend "remote": a model served by an OpenAI-compatible server, named by the server's URL. */
export const remoteBackend: Backend = {
  name: "remote",
  available: () => typeof fetch === "function",
  unavailableReason: () => "this runtime has no fetch()",
  canLoad: async (path) => isServerUrl(path),
  loadModel: loadRemoteModel,
  capabilities: REMOTE_CAPABILITIES,
};

register(remoteBackend);
