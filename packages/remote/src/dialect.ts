/**
 * The servers `remote` knows and what each takes beyond OpenAI's API. One
 * table, so that the request builder, the UNSUPPORTED checks and docs/remote.md
 * read the same facts.
 */
export const DIALECTS = ["llama-server", "vllm", "sglang", "ollama", "tgi", "openai", "infer"] as const;
export type Dialect = (typeof DIALECTS)[number];

export interface DialectFeatures {
  /** Sampling fields beyond temperature and top_p, by the server's name for them. */
  topK?: string;
  minP?: string;
  repeatPenalty?: string;
  /** The window of the repeat penalty; servers without one penalise the whole text. */
  repeatLastN?: string;
  seed: boolean;
  ignoreEos: boolean;
  /** How generated token ids come back: in each chunk's logprobs (`n_probs`), or as `token_ids` when asked. */
  tokenIds?: "n_probs" | "return_token_ids";
  /** Log-probabilities of generated tokens (OpenAI's `logprobs` fields). */
  logprobs: boolean;
  /** Every token's log-probability at a step (classify's `logits`): llama-server's n_probs up to the vocabulary. */
  fullDistribution: boolean;
  /** A GBNF grammar field. */
  grammar?: string;
  /** How a JSON schema is sent. */
  jsonSchema: "json_schema" | "guided_json" | "response_format" | "tgi_grammar";
  /** A chat template given per request. */
  chatTemplate?: string;
  /** `/tokenize` and `/detokenize` at the server's root. */
  tokenizer: boolean;
  /** Per-request timings in the answer (`timings`: prompt_n, prompt_ms, predicted_n, predicted_ms). */
  timings: boolean;
}

export const DIALECT_FEATURES: Readonly<Record<Dialect, DialectFeatures>> = {
  "llama-server": {
    topK: "top_k",
    minP: "min_p",
    repeatPenalty: "repeat_penalty",
    repeatLastN: "repeat_last_n",
    seed: true,
    ignoreEos: true,
    tokenIds: "n_probs",
    logprobs: true,
    fullDistribution: true,
    grammar: "grammar",
    jsonSchema: "json_schema",
    tokenizer: true,
    timings: true,
  },
  vllm: {
    topK: "top_k",
    minP: "min_p",
    repeatPenalty: "repetition_penalty",
    seed: true,
    ignoreEos: true,
    tokenIds: "return_token_ids",
    logprobs: true,
    fullDistribution: false,
    grammar: "guided_grammar",
    jsonSchema: "guided_json",
    chatTemplate: "chat_template",
    tokenizer: true,
    timings: false,
  },
  sglang: {
    topK: "top_k",
    minP: "min_p",
    repeatPenalty: "repetition_penalty",
    seed: true,
    ignoreEos: true,
    logprobs: true,
    fullDistribution: false,
    grammar: "ebnf",
    jsonSchema: "response_format",
    tokenizer: false,
    timings: false,
  },
  ollama: { seed: true, ignoreEos: false, logprobs: false, fullDistribution: false, jsonSchema: "response_format", tokenizer: false, timings: false },
  tgi: { seed: true, ignoreEos: false, logprobs: true, fullDistribution: false, jsonSchema: "tgi_grammar", tokenizer: false, timings: false },
  openai: { seed: true, ignoreEos: false, logprobs: true, fullDistribution: false, jsonSchema: "response_format", tokenizer: false, timings: false },
  // Our own `infer serve` (packages/server).
  infer: {
    topK: "top_k",
    minP: "min_p",
    repeatPenalty: "repeat_penalty",
    seed: true,
    ignoreEos: true,
    tokenIds: "return_token_ids",
    logprobs: true,
    fullDistribution: false,
    jsonSchema: "response_format",
    tokenizer: false,
    timings: false,
  },
};

/** What the probes saw, for `detectDialect`. */
export interface DialectClues {
  /** `owned_by` of the server's models. */
  ownedBy: string[];
  /** llama-server's `/props` answered. */
  props: boolean;
  /** An Ollama `/api/version` answered. */
  ollamaVersion: boolean;
  /** TGI's `/info` answered with a `model_id`. */
  tgiInfo: boolean;
}

/** Which server this is, from what its endpoints answered; an unknown one is treated as OpenAI's API alone. */
export function detectDialect(clues: DialectClues): Dialect {
  const owners = clues.ownedBy.map((o) => o.toLowerCase());
  if (clues.props || owners.includes("llamacpp")) return "llama-server";
  if (owners.includes("vllm")) return "vllm";
  if (owners.includes("sglang")) return "sglang";
  if (owners.includes("infer")) return "infer";
  if (clues.ollamaVersion || owners.includes("library") || owners.includes("ollama")) return "ollama";
  if (clues.tgiInfo || owners.includes("tgi") || owners.includes("text-generation-inference")) return "tgi";
  return "openai";
}
