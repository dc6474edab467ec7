import { DEFAULT_GENERATE_OPTIONS, InferenceError, type ResolvedGenerateOptions } from "@infer/core";
import { type Dialect, DIALECT_FEATURES } from "./dialect.js";

type Body = Record<string, unknown>;

/** What a request asks beyond sampling: how many log-probability alternatives, for classify the whole distribution. */
export interface RequestNeeds {
  /** Alternatives per token to return (generate's `logprobs`); undefined = no log-probabilities asked. */
  logprobs?: number;
  /** classify's `logits: true`: every token's log-probability at the step. */
  vocabSize?: number;
  chat: boolean;
}

function unsupported(dialect: Dialect, option: string, why = "this server has no field for it"): InferenceError {
  return new InferenceError("UNSUPPORTED", `remote server (${dialect}) cannot honour option '${option}': ${why}`, {
    details: { option, dialect },
  });
}

/**
 * The request fields for `options` in this server's dialect, or UNSUPPORTED
 * (before anything is sent) for an option it cannot honour. An option left at
 * the contract's default is sent only where the server has the field: a
 * server without it keeps its own default, which callers did not ask to change.
 */
export function generationFields(dialect: Dialect, options: ResolvedGenerateOptions, needs: RequestNeeds): Body {
  const f = DIALECT_FEATURES[dialect];
  const body: Body = { temperature: options.temperature, top_p: options.topP };
  const optional = (name: keyof ResolvedGenerateOptions, field: string | undefined, value: unknown, isDefault: boolean) => {
    if (field) body[field] = value;
    else if (!isDefault) throw unsupported(dialect, name);
  };
  optional("topK", f.topK, options.topK, options.topK === DEFAULT_GENERATE_OPTIONS.topK || options.topK === 0);
  optional("minP", f.minP, options.minP, options.minP === DEFAULT_GENERATE_OPTIONS.minP || options.minP === 0);
  if (options.repeatPenalty !== 1) {
    optional("repeatPenalty", f.repeatPenalty, options.repeatPenalty, false);
    optional("repeatLastN", f.repeatLastN, options.repeatLastN, options.repeatLastN === DEFAULT_GENERATE_OPTIONS.repeatLastN);
  }
  if (options.seed !== undefined) {
    if (!f.seed) throw unsupported(dialect, "seed");
    body.seed = options.seed;
  }
  if (options.ignoreEos) {
    if (!f.ignoreEos) throw unsupported(dialect, "ignoreEos");
    body.ignore_eos = true;
  }
  if (options.stopTokens.length > 0 && !f.tokenIds) throw unsupported(dialect, "stopTokens", "it does not report token ids");
  if (options.grammar !== undefined) {
    if (!f.grammar) throw unsupported(dialect, "grammar", "it takes no GBNF grammar");
    body[f.grammar] = options.grammar;
  }
  if (options.jsonSchema !== undefined) Object.assign(body, schemaFields(f.jsonSchema, options.jsonSchema));
  if (options.chatTemplate !== undefined) {
    if (!needs.chat) throw unsupported(dialect, "chatTemplate", "it applies to chat only");
    if (!f.chatTemplate) throw unsupported(dialect, "chatTemplate", "it renders chats with its own template only");
    body[f.chatTemplate] = options.chatTemplate;
  }
  Object.assign(body, tokenFields(dialect, needs));
  return body;
}

function schemaFields(style: (typeof DIALECT_FEATURES)[Dialect]["jsonSchema"], schema: object): Body {
  switch (style) {
    case "json_schema":
      return { json_schema: schema };
    case "guided_json":
      return { guided_json: schema };
    case "tgi_grammar":
      return { response_format: { type: "json", value: schema } };
    case "response_format":
      return { response_format: { type: "json_schema", json_schema: { name: "output", schema, strict: true } } };
  }
}

/** The fields that bring back token ids and the log-probabilities asked for. */
function tokenFields(dialect: Dialect, needs: RequestNeeds): Body {
  const f = DIALECT_FEATURES[dialect];
  if (needs.vocabSize !== undefined && !f.fullDistribution) {
    throw unsupported(dialect, "logits", "it returns no full-vocabulary distribution");
  }
  if (needs.logprobs !== undefined && !f.logprobs) throw unsupported(dialect, "logprobs", "it returns no log-probabilities");
  if (f.tokenIds === "n_probs") {
    // llama-server reports each token's id with its probabilities: one alternative is the cheapest way to get ids.
    return { n_probs: needs.vocabSize ?? Math.max(1, needs.logprobs ?? 0) };
  }
  const body: Body = f.tokenIds === "return_token_ids" ? { return_token_ids: true } : {};
  if (needs.logprobs !== undefined) {
    if (needs.chat) Object.assign(body, { logprobs: true, top_logprobs: needs.logprobs });
    else body.logprobs = needs.logprobs;
  }
  return body;
}
