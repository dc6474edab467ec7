import { InferenceError, type RemoteOptions } from "@infer/core";

/** Longest wait for the server by default (ms): connecting, retries, and each silence mid-stream. */
export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_RETRIES = 3;
export const DEFAULT_MAX_CONCURRENCY = 8;
/** The environment variable whose value is the API key when `LoadOptions.remote.apiKey` is not given. */
export const API_KEY_ENV = "INFER_REMOTE_API_KEY";

/** Where a server's endpoints are: OpenAI's under `apiBase`, the server's own (`/props`, `/tokenize`) under `root`. */
export interface Endpoint {
  /** As the caller gave it, for messages. */
  url: string;
  root: string;
  apiBase: string;
}

/** `http://host:8080`, `http://host:8080/v1` and `http://host/prefix/v1/` name the same OpenAI-compatible API. */
export function endpointOf(url: string): Endpoint {
  const trimmed = url.replace(/[?#].*$/, "").replace(/\/+$/, "");
  const root = trimmed.replace(/\/v1$/i, "");
  return { url, root, apiBase: `${root}/v1` };
}

export interface ResolvedRemoteOptions {
  model?: string;
  headers: Record<string, string>;
  timeoutMs: number;
  maxRetries: number;
  maxConcurrency: number;
}

/** Defaults filled in; the API key (given, else INFER_REMOTE_API_KEY) becomes a bearer header. */
export function resolveRemoteOptions(options: RemoteOptions = {}, env: Record<string, string | undefined> = readEnv()): ResolvedRemoteOptions {
  const apiKey = options.apiKey ?? env[API_KEY_ENV];
  if (apiKey !== undefined && apiKey.length === 0) {
    throw new InferenceError("INVALID_OPTION", `${API_KEY_ENV} is set but empty`, { details: { option: API_KEY_ENV } });
  }
  const headers: Record<string, string> = { accept: "application/json, text/event-stream", ...options.headers };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  return {
    model: options.model,
    headers,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    maxConcurrency: options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY,
  };
}

function readEnv(): Record<string, string | undefined> {
  const global = globalThis as { process?: { env?: Record<string, string | undefined> } };
  return global.process?.env ?? {};
}
