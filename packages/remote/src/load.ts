import { InferenceError, isServerUrl, type LoadOptions } from "@infer/core";
import { RemoteEmbeddingModel } from "./embedding-model.js";
import { endpointOf, resolveRemoteOptions } from "./endpoint.js";
import { HttpClient } from "./http.js";
import { RemoteModel } from "./model.js";
import { probeServer } from "./probe.js";

/** Load options that set up a local runtime: the server decides these, so asking for one here would be silently ignored. */
const SERVER_SIDE_OPTIONS: (keyof LoadOptions)[] = [
  "contextLength",
  "gpuLayers",
  "parallelSlots",
  "threads",
  "adapterPath",
  "probe",
  "draftModel",
  "quantize",
  "kvType",
  "batchSize",
  "isolate",
];

/** Connects to the server at `url` (its base URL, with or without /v1), probes it, and returns its model. */
export async function loadRemoteModel(url: string, options: LoadOptions = {}): Promise<RemoteModel> {
  if (!isServerUrl(url)) {
    throw new InferenceError("INVALID_OPTION", `backend remote loads an http(s) server URL such as http://host:8080/v1 (got '${url}')`, {
      details: { path: url },
    });
  }
  for (const option of SERVER_SIDE_OPTIONS) {
    if (options[option] !== undefined) {
      throw new InferenceError("UNSUPPORTED", `backend remote cannot honour load option '${option}': set it where the server is started`, {
        details: { option },
      });
    }
  }
  const settings = resolveRemoteOptions(options.remote);
  const http = new HttpClient({ headers: settings.headers, timeoutMs: settings.timeoutMs, maxRetries: settings.maxRetries });
  const endpoint = endpointOf(url);
  const facts = await probeServer(http, endpoint, settings.model, new AbortController().signal);
  return facts.embeddings ? new RemoteEmbeddingModel(http, endpoint, facts, settings) : new RemoteModel(http, endpoint, facts, settings);
}
