import { InferenceError } from "./errors.js";
import { grammarProblem } from "./grammar.js";
import { describeValue } from "./json.js";
import type { ProbeSink } from "./probes.js";
import type { BatchResult, Message, Token } from "./types.js";

/** Options of `generate`, `chat`, `batchGenerate` and their text forms. Every field is optional. */
export interface GenerateOptions {
  /** Most new tokens to produce; undefined = until EOS or the end of the context. */
  maxTokens?: number;
  /** Sampling temperature; 0 = greedy (argmax). */
  temperature?: number;
  /** Keep only the k most likely tokens; 0 = off. */
  topK?: number;
  /** Keep the smallest set of tokens whose probability reaches p; 1 = off. */
  topP?: number;
  /** Drop tokens less likely than minP x the top token's probability; 0 = off. */
  minP?: number;
  /** Divide positive logits (multiply negative ones) of recently seen tokens; 1 = off. */
  repeatPenalty?: number;
  /** How many recent tokens the repeat penalty looks at. */
  repeatLastN?: number;
  /** Same seed, same options, same model: same tokens. Undefined = a fresh random seed per call. */
  seed?: number;
  /** Token ids that end generation (in addition to the model's EOS ids); never emitted. */
  stopTokens?: number[];
  /** Strings that end generation; text before them is emitted, the stop string itself is not. */
  stopStrings?: string[];
  /** Keep generating past EOS (benchmarks). */
  ignoreEos?: boolean;
  /** `classify`: return full-vocabulary logits at the last position. */
  logits?: boolean;
  /**
   * Attach to each token its log-probability and this many most likely
   * alternatives (0-20), from the model's distribution before sampling
   * filters; backends with the `probe.logits` capability.
   */
  logprobs?: number;
  /** Cancels the call: streams throw `ABORTED`, text and batch calls finish with reason "abort". */
  signal?: AbortSignal;
  /**
   * `generate` / `chat`: a stream whose consumer has not asked for the next
   * token this long (ms) after the last one is abandoned: the call is aborted
   * and the model serves the next one (calls run one at a time, so an
   * iterator dropped without `return()` would otherwise hold the model until
   * `close()`). A later `next()` on it throws `ABORTED`. 0 = wait forever.
   */
  idleTimeoutMs?: number;
  /** `chat`: a Jinja chat template to use instead of (or when the model has no) template of its own. */
  chatTemplate?: string;
  /** Constrain output to JSON matching this JSON schema (backends with the `grammar` capability). */
  jsonSchema?: object;
  /** Constrain output with a GBNF grammar (backends with the `grammar` capability). */
  grammar?: string;
}

/** A batch prompt: plain text, or messages rendered with the model's chat template. */
export type BatchPrompt = string | Message[];

export interface BatchGenerateOptions extends GenerateOptions {
  /** Called with each prompt's tokens as they are released (index into `prompts`). */
  onToken?: (index: number, token: Token) => void;
  /** Called once per prompt as soon as it is finished (after its last `onToken`), with its result. */
  onFinish?: (index: number, result: BatchResult) => void;
  /**
   * Each prompt's own stop strings, by index into `prompts`: a prompt with an
   * entry stops on those instead of `stopStrings` (so requests with different
   * stop strings can share one batch).
   */
  promptStopStrings?: (string[] | undefined)[];
}

export type ClassifyOptions = Pick<
  GenerateOptions,
  "temperature" | "topK" | "topP" | "minP" | "seed" | "logits" | "signal"
>;

/** Options of `loadModel`. */
export interface LoadOptions {
  /** Pin a backend by name ("wasm", "llama_cpp", ...); otherwise one is chosen. */
  backend?: string;
  /** KV cache size in tokens; default: the model's, capped by what memory allows. */
  contextLength?: number;
  /** Layers to offload to a GPU: -1 = all, 0 = CPU only. */
  gpuLayers?: number;
  /** Sequences that can decode together in one context (batching, server slots). */
  parallelSlots?: number;
  /** CPU threads; default: the backend's own (wasm: the physical cores; llama_cpp: one fewer, see docs/llama-cpp.md). */
  threads?: number;
  /** A LoRA adapter to apply at load. */
  adapterPath?: string;
  /** Receives probe events (tokens, logits summaries, attention, memory, training). */
  probe?: ProbeSink | ProbeSink[];
  /** A smaller model of the same vocabulary for speculative decoding. */
  draftModel?: string;
  /** Quantize floating-point weights once at load ("q8_0", "q4_0", ...). */
  quantize?: string;
  /** KV cache element type ("f32", "f16", "q8_0"). */
  kvType?: string;
  /**
   * Most prompt tokens one forward pass evaluates (llama.cpp's batch size): a
   * longer prompt is evaluated in chunks of this many. Smaller holds less memory
   * for activations, larger prefills faster. Default: the backend's (wasm 128,
   * llama_cpp 512).
   */
  batchSize?: number;
  /**
   * Memory for prefix reuse (backend wasm), in bytes: a prompt that starts with
   * tokens an earlier call left in the KV cache (a chat's history, a shared
   * system prompt) reuses their keys and values instead of evaluating them
   * again. Each sequence slot keeps what its last call left; copies of earlier
   * conversations' prefixes are kept, least recently used dropped first, within
   * this budget. 0 turns prefix reuse off. Default: `DEFAULT_PROMPT_CACHE_BYTES`
   * (64 MiB). llama_cpp reuses each slot's own tokens and takes no budget.
   */
  promptCacheBytes?: number;
  /**
   * Run the model in a child process of its own (backend llama_cpp), so that a
   * native crash fails the calls in flight with `BACKEND_CRASHED` and the model
   * restarts for the next call instead of taking the whole process down. It
   * costs a process per model and a message per token; such a model has no
   * synchronous tokenizer (no `TokenizerModel`). Backends that run no native
   * code (wasm) refuse it with `UNSUPPORTED`.
   */
  isolate?: boolean;
  /**
   * Called as the model's bytes arrive: phase "download" while a URL is fetched, "load" while
   * bytes are read into the backend's memory. `totalBytes` is undefined when the size is unknown
   * (a download without Content-Length). Backends that cannot report progress never call it.
   */
  onProgress?: (progress: LoadProgress) => void;
  /** Backend `remote` (a server's URL as the model): how to reach and use that server. */
  remote?: RemoteOptions;
}

export interface LoadProgress {
  phase: "download" | "load";
  loadedBytes: number;
  totalBytes: number | undefined;
}

/** `LoadOptions.remote`: the connection to an OpenAI-compatible server. */
export interface RemoteOptions {
  /** The server's model id to use; default: the only model it lists (an error when it lists several). */
  model?: string;
  /** Sent as `Authorization: Bearer <apiKey>`; default: the environment's INFER_REMOTE_API_KEY. */
  apiKey?: string;
  /** Extra request headers (a gateway's routing or tenant headers). */
  headers?: Record<string, string>;
  /** Longest wait for the server: to connect and for each response or streamed chunk (ms). */
  timeoutMs?: number;
  /** Retries of a request refused before any token (connection refused, 429, 503); 0 = none. */
  maxRetries?: number;
  /** Most requests in flight at once from this model (batchGenerate, classify). */
  maxConcurrency?: number;
}

/**
 * The documented defaults, in one place. Sampling defaults follow llama.cpp's,
 * so the same request gives comparable text across backends.
 */
export const DEFAULT_GENERATE_OPTIONS = Object.freeze({
  temperature: 0.8,
  topK: 40,
  topP: 0.95,
  minP: 0.05,
  repeatPenalty: 1,
  repeatLastN: 64,
  idleTimeoutMs: 60_000,
});

/** LoadOptions.promptCacheBytes when not given: room for a few conversations' KV of a small model. */
export const DEFAULT_PROMPT_CACHE_BYTES = 64 * 2 ** 20;

export const DEFAULT_LOAD_OPTIONS = Object.freeze({
  gpuLayers: -1,
  parallelSlots: 4,
});

/** GenerateOptions with every sampling default filled in. */
export interface ResolvedGenerateOptions extends GenerateOptions {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repeatPenalty: number;
  repeatLastN: number;
  idleTimeoutMs: number;
  stopTokens: number[];
  stopStrings: string[];
}

type Check = (value: unknown) => string | undefined;

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

const intAtLeast =
  (min: number): Check =>
  (v) =>
    isInt(v) && v >= min ? undefined : `must be an integer >= ${min}`;
const numberIn =
  (min: number, max: number, minOpen = false): Check =>
  (v) =>
    isNum(v) && (minOpen ? v > min : v >= min) && v <= max
      ? undefined
      : `must be a number in ${minOpen ? "(" : "["}${min}, ${max}]`;
const bool: Check = (v) => (typeof v === "boolean" ? undefined : "must be a boolean");
const str: Check = (v) => (typeof v === "string" && v.length > 0 ? undefined : "must be a non-empty string");
const signal: Check = (v) =>
  typeof v === "object" && v !== null && "aborted" in v && typeof (v as AbortSignal).addEventListener === "function"
    ? undefined
    : "must be an AbortSignal";
const tokenIds: Check = (v) =>
  Array.isArray(v) && v.every((x) => isInt(x) && x >= 0) ? undefined : "must be an array of token ids (integers >= 0)";
const stopStrings: Check = (v) =>
  Array.isArray(v) && v.every((x) => typeof x === "string" && x.length > 0)
    ? undefined
    : "must be an array of non-empty strings";
const object: Check = (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? undefined : "must be an object");
const probe: Check = (v) => {
  const sinks = Array.isArray(v) ? v : [v];
  return sinks.every((s) => typeof s === "function" || (typeof s === "object" && s !== null && typeof s.emit === "function"))
    ? undefined
    : "must be a probe sink (a function or an object with emit()) or an array of them";
};

const headers: Check = (v) =>
  object(v) ?? (Object.values(v as object).every((x) => typeof x === "string") ? undefined : "must map header names to strings");

const REMOTE_CHECKS: Record<keyof RemoteOptions, Check> = {
  model: str,
  apiKey: str,
  headers,
  timeoutMs: intAtLeast(1),
  maxRetries: intAtLeast(0),
  maxConcurrency: intAtLeast(1),
};

/** A nested options object: the first unknown or bad field, named. */
function checkFields(value: unknown, checks: Record<string, Check>): string | undefined {
  const problem = object(value);
  if (problem) return problem;
  for (const [key, field] of Object.entries(value as object)) {
    if (field === undefined) continue;
    const check = checks[key];
    if (!check) return `has an unknown field '${key}' (known: ${Object.keys(checks).join(", ")})`;
    const bad = check(field);
    if (bad) return `field '${key}' ${bad}`;
  }
  return undefined;
}

const GENERATE_CHECKS: Record<keyof GenerateOptions, Check> = {
  maxTokens: intAtLeast(1),
  temperature: numberIn(0, 100),
  topK: intAtLeast(0),
  topP: numberIn(0, 1, true),
  minP: numberIn(0, 1),
  repeatPenalty: numberIn(0, 100, true),
  repeatLastN: intAtLeast(0),
  seed: (v) => (isInt(v) && v >= 0 && v <= Number.MAX_SAFE_INTEGER ? undefined : "must be an integer >= 0"),
  stopTokens: tokenIds,
  stopStrings,
  ignoreEos: bool,
  logits: bool,
  logprobs: (v) => (isInt(v) && v >= 0 && v <= 20 ? undefined : "must be an integer in [0, 20]"),
  signal,
  idleTimeoutMs: intAtLeast(0),
  chatTemplate: str,
  jsonSchema: object,
  grammar: (v) => str(v) ?? grammarProblem(v as string),
};

const CLASSIFY_KEYS = ["temperature", "topK", "topP", "minP", "seed", "logits", "signal"] as const;

const LOAD_CHECKS: Record<keyof LoadOptions, Check> = {
  backend: str,
  contextLength: intAtLeast(1),
  gpuLayers: intAtLeast(-1),
  parallelSlots: intAtLeast(1),
  threads: intAtLeast(1),
  adapterPath: str,
  probe,
  draftModel: str,
  quantize: (v) =>
    typeof v === "string" && QUANTIZE_TYPES.includes(v.toLowerCase())
      ? undefined
      : `must be one of ${QUANTIZE_TYPES.join(", ")}`,
  kvType: (v) =>
    typeof v === "string" && KV_TYPES.includes(v.toLowerCase()) ? undefined : `must be one of ${KV_TYPES.join(", ")}`,
  batchSize: intAtLeast(1),
  promptCacheBytes: intAtLeast(0),
  isolate: bool,
  onProgress: (v) => (typeof v === "function" ? undefined : "must be a function"),
  remote: (v) => checkFields(v, REMOTE_CHECKS),
};

/** The names of every option, e.g. for CLIs and servers that map their own flags onto them. */
export const GENERATE_OPTION_NAMES = Object.freeze(Object.keys(GENERATE_CHECKS) as (keyof GenerateOptions)[]);
export const CLASSIFY_OPTION_NAMES: readonly (keyof GenerateOptions)[] = CLASSIFY_KEYS;
export const LOAD_OPTION_NAMES = Object.freeze(Object.keys(LOAD_CHECKS) as (keyof LoadOptions)[]);

export const QUANTIZE_TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"];
export const KV_TYPES = ["f32", "f16", "q8_0"];

function closestKey(name: string, keys: readonly string[]): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[_-]/g, "");
  return keys.find((k) => norm(k) === norm(name));
}

function validate(
  what: string,
  options: unknown,
  checks: Record<string, Check>,
  allowed: readonly string[] = Object.keys(checks),
): void {
  if (options === undefined) return;
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new InferenceError("INVALID_OPTION", `${what} options must be a plain object`, { details: { options } });
  }
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (!allowed.includes(key)) {
      const hint = closestKey(key, allowed);
      throw new InferenceError(
        "INVALID_OPTION",
        `unknown ${what} option '${key}'${hint ? ` (did you mean '${hint}'?)` : ""}`,
        { details: { option: key } },
      );
    }
    const problem = checks[key]!(value);
    if (problem) {
      throw new InferenceError("INVALID_OPTION", `${what} option '${key}' ${problem} (got ${describeValue(value)})`, {
        details: { option: key, value },
      });
    }
  }
}


export function validateGenerateOptions(options: unknown): asserts options is GenerateOptions | undefined {
  validate("generate", options, GENERATE_CHECKS);
}

export function validateClassifyOptions(options: unknown): asserts options is ClassifyOptions | undefined {
  validate("classify", options, GENERATE_CHECKS, CLASSIFY_KEYS);
}

export function validateLoadOptions(options: unknown): asserts options is LoadOptions | undefined {
  validate("load", options, LOAD_CHECKS);
}

/** Validates and fills sampling defaults. */
export function resolveGenerateOptions(options: GenerateOptions = {}): ResolvedGenerateOptions {
  validateGenerateOptions(options);
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as GenerateOptions;
  return {
    ...DEFAULT_GENERATE_OPTIONS,
    ...defined,
    stopTokens: options.stopTokens ?? [],
    stopStrings: options.stopStrings ?? [],
  };
}

/** A fresh seed for calls that did not pin one. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 0x1_0000_0000);
}
