import { describeValue, type GenerateOptions, type Message, type Role } from "@infer/core";
import { badRequest, HttpError } from "./errors.js";

/** What the chat and text completion endpoints share once the body is checked. */
export interface CompletionRequest {
  model: string | undefined;
  stream: boolean;
  includeUsage: boolean;
  options: GenerateOptions;
  /** response_format asked for constrained JSON: needs the grammar capability. */
  wantsGrammar: boolean;
  /** `return_token_ids: true` (vLLM's field): each choice carries its tokens' ids as `token_ids`. */
  returnTokenIds: boolean;
}

export interface ChatRequest extends CompletionRequest {
  messages: Message[];
}

export interface TextRequest extends CompletionRequest {
  prompt: string;
  /** `echo: true`: the prompt is repeated before the completion. */
  echo: boolean;
}

export interface EmbeddingRequest {
  model: string | undefined;
  input: string[];
  encoding: "float" | "base64";
}

type Body = Record<string, unknown>;

function asObject(body: unknown): Body {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest("the request body must be a JSON object", null, "invalid_json");
  }
  return body as Body;
}

function optionalNumber(body: Body, key: string, min: number, max: number, integer = false): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  // JSON.parse reads a number too large for a double (1e309) as Infinity, which JSON.stringify would show as null.
  if (typeof v === "number" && !Number.isFinite(v)) {
    throw badRequest(`'${key}' must be a finite number (got ${v}: the JSON number is too large for a double)`, key);
  }
  if (typeof v !== "number" || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw badRequest(`'${key}' must be ${integer ? "an integer" : "a number"} in [${min}, ${max}] (got ${describeValue(v)})`, key);
  }
  return v;
}

/** A flag a client may leave out (false); `"yes"` or 1 are refused rather than read as false. */
function optionalBoolean(body: Body, key: string, param = key): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw badRequest(`'${param}' must be a boolean (got ${describeValue(v)})`, param);
  return v;
}

function modelName(body: Body): string | undefined {
  const v = body.model;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.length === 0) throw badRequest("'model' must be a non-empty string", "model");
  return v;
}

function stopStrings(body: Body): string[] | undefined {
  const v = body.stop;
  if (v === undefined || v === null) return undefined;
  const list = typeof v === "string" ? [v] : v;
  if (!Array.isArray(list) || !list.every((s) => typeof s === "string")) {
    throw badRequest("'stop' must be a string or an array of strings", "stop");
  }
  const nonEmpty = list.filter((s: string) => s.length > 0);
  if (nonEmpty.length > 16) throw badRequest("'stop' takes at most 16 strings", "stop");
  return nonEmpty.length ? nonEmpty : undefined;
}

/**
 * Sampling and length fields shared by both completion endpoints. Besides
 * OpenAI's fields, llama.cpp's `top_k`, `min_p` and `repeat_penalty` are read.
 * Log-probabilities are read by each endpoint (their fields differ).
 */
function commonRequest(body: Body): CompletionRequest {
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw badRequest("only 'n': 1 is supported", "n");
  const maxTokens =
    optionalNumber(body, "max_completion_tokens", 1, 1 << 30, true) ?? optionalNumber(body, "max_tokens", 1, 1 << 30, true);
  const options: GenerateOptions = {
    maxTokens,
    temperature: optionalNumber(body, "temperature", 0, 2),
    topP: optionalNumber(body, "top_p", 0, 1),
    topK: optionalNumber(body, "top_k", 0, 1 << 20, true),
    minP: optionalNumber(body, "min_p", 0, 1),
    repeatPenalty: optionalNumber(body, "repeat_penalty", 0, 100),
    seed: optionalNumber(body, "seed", 0, Number.MAX_SAFE_INTEGER, true),
    stopStrings: stopStrings(body),
    // llama.cpp's and vLLM's field: keep generating past EOS.
    ignoreEos: optionalBoolean(body, "ignore_eos") || undefined,
  };
  // top_p 0 means "only the top token" to OpenAI clients; the contract's topP is (0, 1].
  if (options.topP === 0) {
    options.topP = undefined;
    options.topK = 1;
  }
  if (options.repeatPenalty === 0) throw badRequest("'repeat_penalty' must be > 0", "repeat_penalty");
  const stream = optionalBoolean(body, "stream");
  const streamOptions = body.stream_options as Body | undefined | null;
  const includeUsage = stream && typeof streamOptions === "object" && streamOptions !== null && optionalBoolean(streamOptions, "include_usage", "stream_options.include_usage");
  const returnTokenIds = optionalBoolean(body, "return_token_ids");
  const request: CompletionRequest = { model: modelName(body), stream, includeUsage, options, wantsGrammar: false, returnTokenIds };
  applyResponseFormat(body, request);
  return request;
}

function applyResponseFormat(body: Body, request: CompletionRequest): void {
  const format = body.response_format as Body | undefined | null;
  if (format === undefined || format === null) return;
  if (typeof format !== "object" || typeof format.type !== "string") {
    throw badRequest("'response_format' must be an object with a 'type'", "response_format");
  }
  if (format.type === "text") return;
  if (format.type === "json_object") {
    request.options.jsonSchema = { type: "object" };
  } else if (format.type === "json_schema") {
    const spec = format.json_schema as Body | undefined;
    if (typeof spec !== "object" || spec === null || typeof spec.schema !== "object" || spec.schema === null) {
      throw badRequest("'response_format.json_schema.schema' must be a JSON schema object", "response_format");
    }
    request.options.jsonSchema = spec.schema as object;
  } else {
    throw badRequest(`'response_format.type' must be text, json_object or json_schema (got ${describeValue(format.type)})`, "response_format");
  }
  request.wantsGrammar = true;
}

/** Chat: `logprobs: true` asks for them, `top_logprobs` (0-20) for alternatives; the contract's count. */
function chatLogprobs(body: Body): number | undefined {
  const wanted = body.logprobs;
  if (wanted !== undefined && wanted !== null && typeof wanted !== "boolean") {
    throw badRequest(`'logprobs' must be a boolean (got ${describeValue(wanted)})`, "logprobs");
  }
  const top = optionalNumber(body, "top_logprobs", 0, 20, true);
  if (wanted !== true) {
    if (top !== undefined) throw badRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    return undefined;
  }
  return top ?? 0;
}

/** Legacy completions: `logprobs` is the number of alternatives (0-5); null or absent asks for none. */
function legacyLogprobs(body: Body): number | undefined {
  if (body.top_logprobs !== undefined && body.top_logprobs !== null) {
    throw badRequest("'top_logprobs' is a chat completions field; /v1/completions takes 'logprobs': <0-5>", "top_logprobs");
  }
  if (body.logprobs === false) return undefined;
  return optionalNumber(body, "logprobs", 0, 5, true);
}

const ROLES: Role[] = ["system", "user", "assistant", "tool"];

/** Message content may be a string or an array of parts; only text parts are understood. */
function messageText(content: unknown, index: number): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content
      .map((part: unknown, j) => {
        const p = part as Body | null;
        if (typeof p !== "object" || p === null || p.type !== "text" || typeof p.text !== "string") {
          throw badRequest(`messages[${index}].content[${j}] must be a text part ({type: "text", text})`, `messages[${index}].content`);
        }
        return p.text;
      })
      .join("");
  }
  throw badRequest(`messages[${index}].content must be a string or an array of text parts`, `messages[${index}].content`);
}

export function parseChatRequest(raw: unknown): ChatRequest {
  const body = asObject(raw);
  const list = body.messages;
  if (!Array.isArray(list) || list.length === 0) throw badRequest("'messages' must be a non-empty array", "messages");
  const messages = list.map((m: unknown, i): Message => {
    const msg = m as Body | null;
    if (typeof msg !== "object" || msg === null) throw badRequest(`messages[${i}] must be an object`, "messages");
    // OpenAI's newer "developer" role plays the system role.
    const role = msg.role === "developer" ? "system" : msg.role;
    if (!ROLES.includes(role as Role)) {
      throw badRequest(`messages[${i}].role must be one of system, developer, user, assistant, tool`, `messages[${i}].role`);
    }
    return { role: role as Role, content: messageText(msg.content, i) };
  });
  const request = commonRequest(body);
  request.options.logprobs = chatLogprobs(body);
  return { ...request, messages };
}

export function parseTextRequest(raw: unknown): TextRequest {
  const body = asObject(raw);
  let prompt = body.prompt;
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1) throw badRequest("'prompt' as an array must hold exactly one string", "prompt");
    prompt = prompt[0];
  }
  if (typeof prompt !== "string") throw badRequest("'prompt' must be a string", "prompt");
  const request = commonRequest(body);
  request.options.logprobs = legacyLogprobs(body);
  const echo = optionalBoolean(body, "echo");
  if (echo && request.options.logprobs !== undefined) {
    // OpenAI would score the prompt's tokens too; the contract only scores generated ones.
    throw new HttpError(
      400,
      "'echo' together with 'logprobs' is not supported: this server reports log-probabilities of generated tokens only, not of the prompt",
      "invalid_request_error",
      "unsupported_parameter",
      "echo",
    );
  }
  return { ...request, prompt, echo };
}

export function parseEmbeddingRequest(raw: unknown): EmbeddingRequest {
  const body = asObject(raw);
  const input = typeof body.input === "string" ? [body.input] : body.input;
  if (!Array.isArray(input) || input.length === 0 || !input.every((s) => typeof s === "string")) {
    throw badRequest("'input' must be a string or a non-empty array of strings", "input");
  }
  const encoding = body.encoding_format ?? "float";
  if (encoding !== "float" && encoding !== "base64") {
    throw badRequest("'encoding_format' must be float or base64", "encoding_format");
  }
  return { model: modelName(body), input, encoding };
}
