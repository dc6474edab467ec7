import { InferenceError, isInferenceError, type ModelInfo } from "@infer/core";
import { type Dialect, detectDialect } from "./dialect.js";
import type { Endpoint } from "./endpoint.js";
import type { HttpClient } from "./http.js";
import { remoteError } from "./failures.js";

/** What loading learnt of the server: which it is, the model used, and the optional endpoints that answered. */
export interface ServerFacts {
  dialect: Dialect;
  /** The model id sent with every request. */
  model: string;
  /** Every model id the server lists. */
  models: string[];
  info: ModelInfo;
  /** `/v1/embeddings` answered for this model. */
  embeddings: boolean;
  /** `/tokenize` and `/detokenize` answered. */
  tokenizer: boolean;
  /**
   * The tokenizer puts a space before the text (SentencePiece's space prefix):
   * the server's pieces then start a text with a space that decoding the ids
   * (llama.cpp's detokenizer, so every local backend) leaves out.
   */
  spacePrefix: boolean;
  /** llama-server's `/props`, when it answered. */
  props?: Record<string, unknown>;
}

type Json = Record<string, unknown>;

/**
 * Asks the server what it is and serves: `/v1/models` (must answer), then the
 * endpoints that identify a dialect and the optional features, each allowed to
 * be missing. Picks the model: the one asked for, or the only one listed.
 */
export async function probeServer(http: HttpClient, endpoint: Endpoint, wanted: string | undefined, signal: AbortSignal): Promise<ServerFacts> {
  const listing = (await http.json(`${endpoint.apiBase}/models`, undefined, signal)).body as Json;
  const entries = Array.isArray(listing?.data) ? (listing.data as Json[]).filter((m) => typeof m?.id === "string") : undefined;
  if (!entries) throw remoteError(endpoint.url, "GET /v1/models did not answer an OpenAI model list ({data: [{id}]})");
  const models = entries.map((m) => m.id as string);
  const model = pickModel(endpoint.url, models, wanted);
  const entry = entries.find((m) => m.id === model) ?? {};
  const ownedBy = entries.map((m) => (typeof m.owned_by === "string" ? m.owned_by : ""));

  const props = await optional(http, `${endpoint.root}/props`, undefined, signal);
  const isLlamaServer = props !== undefined && ("default_generation_settings" in props || "build_info" in props);
  const known = isLlamaServer || ownedBy.some((o) => ["llamacpp", "vllm", "sglang", "infer"].includes(o.toLowerCase()));
  const ollamaVersion = !known && (await optional(http, `${endpoint.root}/api/version`, undefined, signal)) !== undefined;
  const tgi = !known && !ollamaVersion ? await optional(http, `${endpoint.root}/info`, undefined, signal) : undefined;
  const dialect = detectDialect({
    ownedBy,
    props: isLlamaServer,
    ollamaVersion,
    tgiInfo: typeof tgi?.model_id === "string",
  });

  // The optional endpoints are asked only of servers that may have them (OpenAI's API bills every call).
  const selfHosted = dialect !== "openai";
  const embeddings =
    selfHosted && (await optional(http, `${endpoint.apiBase}/embeddings`, { model, input: "probe" }, signal)) !== undefined;
  const tokenized = dialect === "llama-server" ? await optional(http, `${endpoint.root}/tokenize`, { content: "a", add_special: false }, signal) : undefined;
  const tokenizer = tokenized !== undefined;
  const spacePrefix = tokenizer && (await optional(http, `${endpoint.root}/detokenize`, { tokens: tokenized.tokens }, signal))?.content === " a";
  return {
    dialect,
    model,
    models,
    info: infoOf(entry, isLlamaServer ? props : undefined),
    embeddings,
    tokenizer,
    spacePrefix,
    props: isLlamaServer ? props : undefined,
  };
}

function pickModel(url: string, models: string[], wanted: string | undefined): string {
  if (wanted !== undefined) {
    if (models.includes(wanted)) return wanted;
    throw new InferenceError("MODEL_NOT_FOUND", `remote server ${url} does not list model '${wanted}' (it lists: ${models.join(", ") || "none"})`, {
      details: { url, model: wanted, models },
    });
  }
  if (models.length === 1) return models[0]!;
  throw new InferenceError(
    "INVALID_OPTION",
    models.length === 0
      ? `remote server ${url} lists no model`
      : `remote server ${url} lists ${models.length} models (${models.join(", ")}): choose one with LoadOptions.remote.model`,
    { details: { option: "remote.model", url, models } },
  );
}

/** A JSON answer of an endpoint the server may not have: undefined when it failed with an HTTP error. */
async function optional(http: HttpClient, url: string, body: unknown, signal: AbortSignal): Promise<Json | undefined> {
  try {
    const answer = await http.json(url, body, signal);
    return typeof answer.body === "object" && answer.body !== null ? (answer.body as Json) : undefined;
  } catch (error) {
    if (isInferenceError(error, "REMOTE_ERROR") || isInferenceError(error, "CONTEXT_OVERFLOW")) return undefined;
    throw error;
  }
}

const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/** ModelInfo from what the server tells: llama-server's model `meta` and `/props`, vLLM's `max_model_len`. */
function infoOf(entry: Json, props: Json | undefined): ModelInfo {
  const meta = (typeof entry.meta === "object" && entry.meta !== null ? entry.meta : {}) as Json;
  const settings = (props?.default_generation_settings ?? {}) as Json;
  const contextLength = num(settings.n_ctx) ?? num(meta.n_ctx) ?? num(entry.max_model_len) ?? 0;
  const trained = num(meta.n_ctx_train);
  return {
    architecture: "remote",
    vocabSize: num(meta.n_vocab) ?? 0,
    numLayers: 0,
    hiddenSize: num(meta.n_embd) ?? 0,
    contextLength,
    quantBits: 0,
    quantGroup: 0,
    format: "remote",
    ...(num(meta.n_params) !== undefined ? { parameters: num(meta.n_params) } : {}),
    ...(trained !== undefined ? { trainedContextLength: trained } : {}),
    warnings: [],
  };
}
