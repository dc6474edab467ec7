import {
  BaseTextModel,
  type BatchSink,
  type ClassifyOptions,
  type ClassifyResult,
  type FinishReason,
  InferenceError,
  isInferenceError,
  makeMetrics,
  type Message,
  type ModelInfo,
  type PromptInput,
  resolveGenerateOptions,
  type ResolvedGenerateOptions,
  type Token,
} from "@infer/core";
import { REMOTE_CAPABILITIES } from "./capabilities.js";
import { parseAnswer } from "./chunks.js";
import { DIALECT_FEATURES, type Dialect } from "./dialect.js";
import type { Endpoint, ResolvedRemoteOptions } from "./endpoint.js";
import { remoteError, unavailable } from "./failures.js";
import type { EventStream, HttpClient } from "./http.js";
import { CallProgress } from "./progress.js";
import type { ServerFacts } from "./probe.js";
import { generationFields } from "./request.js";

/** Runs `work` over `items` with at most `limit` in flight; results in order. */
export async function mapBounded<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

/**
 * A model served by another process over HTTP. Its backend half is requests:
 * each generation is one streamed completion (or chat completion: the server
 * renders its own template), cancelled by closing the stream; stop strings
 * and `maxTokens` are applied here by BaseTextModel like any backend's, so the
 * server is not told the stop strings (it would hold back or drop the token
 * that completes one, and the contract counts it).
 */
export class RemoteModel extends BaseTextModel {
  readonly backend = "remote";
  readonly modelType: string;
  readonly capabilities = REMOTE_CAPABILITIES;

  constructor(
    protected readonly http: HttpClient,
    readonly endpoint: Endpoint,
    protected readonly facts: ServerFacts,
    protected readonly settings: ResolvedRemoteOptions,
  ) {
    super();
    this.modelType = facts.info.architecture;
  }

  /** Which server this is and the model it serves, as probed at load. */
  get server(): { url: string; dialect: Dialect; model: string; embeddings: boolean; tokenizer: boolean } {
    const { dialect, model, embeddings, tokenizer } = this.facts;
    return { url: this.endpoint.url, dialect, model, embeddings, tokenizer };
  }

  info(): ModelInfo {
    return { ...this.facts.info, warnings: [...(this.facts.info.warnings ?? [])] };
  }

  /** The server's token ids for `text` (`/tokenize`, llama-server); UNSUPPORTED where the server has none. */
  async tokenize(text: string, options: { addSpecialTokens?: boolean; signal?: AbortSignal } = {}): Promise<number[]> {
    return this.exclusive(async (signal) => {
      if (typeof text !== "string") throw new InferenceError("INVALID_OPTION", "tokenize() takes a string");
      this.requireTokenizer();
      const url = `${this.endpoint.root}/tokenize`;
      const { body } = await this.http.json(url, { content: text, add_special: options.addSpecialTokens ?? true }, signal);
      const tokens = (body as { tokens?: unknown }).tokens;
      if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t))) throw remoteError(url, "answered no 'tokens' array");
      return tokens as number[];
    }, options.signal);
  }

  /** The text of token ids (`/detokenize`, llama-server); UNSUPPORTED where the server has none. */
  async detokenize(ids: number[], options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.exclusive(async (signal) => {
      if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0)) {
        throw new InferenceError("INVALID_OPTION", "detokenize() takes an array of token ids (integers >= 0)");
      }
      this.requireTokenizer();
      const url = `${this.endpoint.root}/detokenize`;
      const { body } = await this.http.json(url, { tokens: ids }, signal);
      const content = (body as { content?: unknown }).content;
      if (typeof content !== "string") throw remoteError(url, "answered no 'content' string");
      return this.withoutSpacePrefix(content);
    }, options.signal);
  }

  /** A text's start as decoding ids gives it: without the tokenizer's space prefix (see ServerFacts.spacePrefix). */
  private withoutSpacePrefix(text: string): string {
    return this.facts.spacePrefix && text.startsWith(" ") ? text.slice(1) : text;
  }

  private requireTokenizer(): void {
    if (!this.facts.tokenizer) {
      throw new InferenceError("UNSUPPORTED", `remote server ${this.endpoint.url} (${this.facts.dialect}) has no /tokenize and /detokenize`);
    }
  }

  /**
   * The server renders chats with its own template, so "rendering" here is
   * handing the messages on: they travel to `stream` as JSON in the prompt text.
   */
  protected renderChat(messages: Message[]): string {
    return JSON.stringify(messages);
  }

  protected async *stream(input: PromptInput, options: ResolvedGenerateOptions, signal: AbortSignal): AsyncGenerator<Token, FinishReason | void, undefined> {
    const progress = new CallProgress(performance.now());
    try {
      const { url, body } = this.completionRequest(input, options, options.logprobs, undefined, true);
      const events = await this.http.stream(url, body, signal);
      try {
        return yield* answerTokens(events, url, options, progress, (text) => this.withoutSpacePrefix(text));
      } finally {
        // Closing the stream early (a stop string, maxTokens, abort) is what tells the server to stop generating.
        await events.return(false);
      }
    } finally {
      this.lastMetrics = progress.metrics();
    }
  }

  protected async runClassify(prompts: string[], options: ClassifyOptions, signal: AbortSignal): Promise<ClassifyResult[]> {
    const started = performance.now();
    // Classify is greedy unless sampling options say otherwise.
    const resolved = resolveGenerateOptions({ ...options, temperature: options.temperature ?? 0, logits: undefined, maxTokens: 1 });
    const vocabSize = options.logits ? this.facts.info.vocabSize : undefined;
    if (options.logits && !(vocabSize! > 0)) {
      throw new InferenceError("UNSUPPORTED", `remote server ${this.endpoint.url} did not report its vocabulary size: no logits`, {
        details: { option: "logits" },
      });
    }
    let promptTokens = 0;
    const results = await mapBounded(prompts, this.settings.maxConcurrency, async (prompt) => {
      const { url, body } = this.completionRequest({ text: prompt, chat: false }, resolved, 0, vocabSize, false);
      const answer = parseAnswer((await this.http.json(url, body, signal)).body, url, vocabSize ?? 0);
      promptTokens += answer.counts.promptTokens ?? 0;
      const token = answer.tokens[0];
      if (!token) throw remoteError(url, "answered no token for a one-token request");
      const result: ClassifyResult = { token: { id: token.id, text: this.withoutSpacePrefix(token.text) } };
      if (vocabSize !== undefined) result.logits = distribution(token, vocabSize);
      return result;
    });
    const totalMs = performance.now() - started;
    this.lastMetrics = makeMetrics({ promptTokens, generatedTokens: 0, prefillMs: totalMs, decodeMs: 0, totalMs });
    return results;
  }

  protected async runBatch(inputs: PromptInput[], options: ResolvedGenerateOptions, signal: AbortSignal, sink: BatchSink): Promise<void> {
    const started = performance.now();
    const progress = inputs.map(() => new CallProgress(started));
    await mapBounded(inputs, this.settings.maxConcurrency, async (input, index) => {
      let events: EventStream | undefined;
      try {
        const { url, body } = this.completionRequest(input, options, options.logprobs, undefined, true);
        events = await this.http.stream(url, body, signal);
        const tokens = answerTokens(events, url, options, progress[index]!, (text) => this.withoutSpacePrefix(text));
        for (;;) {
          const step = await tokens.next();
          if (step.done) return sink.end(index, step.value);
          if (!sink.token(index, step.value)) return;
        }
      } catch (error) {
        sink.end(index, signal.aborted || isInferenceError(error, "ABORTED") ? "abort" : "error", error);
      } finally {
        await events?.return(false);
      }
    });
    this.lastMetrics = CallProgress.sum(progress);
  }

  /** Each call is its own request, and the server batches concurrent ones: up to maxConcurrency calls run at once. */
  protected override concurrentCalls(): number {
    return this.settings.maxConcurrency;
  }

  protected async dispose(): Promise<void> {
    // Nothing is held but connections, which close with their streams.
  }

  /** The endpoint and body of one generation in this server's dialect (UNSUPPORTED options throw here, before sending). */
  private completionRequest(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    logprobs: number | undefined,
    vocabSize: number | undefined,
    stream: boolean,
  ): { url: string; body: Record<string, unknown> } {
    const dialect = this.facts.dialect;
    const fields = generationFields(dialect, options, { chat: input.chat, logprobs, vocabSize });
    const body: Record<string, unknown> = { model: this.facts.model, ...fields, stream };
    if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens;
    if (stream) {
      body.stream_options = { include_usage: true };
      // llama-server's counts and times on every chunk: an answer cut short by a stop string still has them.
      if (DIALECT_FEATURES[dialect].timings) body.timings_per_token = true;
    }
    if (input.chat) {
      return { url: `${this.endpoint.apiBase}/chat/completions`, body: { ...body, messages: JSON.parse(input.text) as Message[] } };
    }
    return { url: `${this.endpoint.apiBase}/completions`, body: { ...body, prompt: input.text } };
  }
}

/**
 * The tokens of one streamed answer until the server finishes it (a stop
 * token ends it as "stop"); a stream that ends unfinished is the server gone.
 * The answer's last token (`maxTokens`, which the server was told too) is
 * held until the rest of the stream is read: the server's counts come after
 * it, and the consumer stops reading once it has that token. `firstText`
 * rewrites the text of the first token that has any.
 */
async function* answerTokens(
  events: EventStream,
  url: string,
  options: ResolvedGenerateOptions,
  progress: CallProgress,
  firstText: (text: string) => string,
): AsyncGenerator<Token, FinishReason, undefined> {
  let finish: FinishReason | undefined;
  let last: Token | undefined;
  let started = false;
  for (;;) {
    const step = await events.next();
    if (step.done) {
      if (finish === undefined && last === undefined) throw unavailable(url, "the stream ended before the server finished the answer (did it stop?)");
      if (last) yield last;
      return finish ?? "length";
    }
    const answer = parseAnswer(step.value, url, options.logprobs);
    progress.count(answer.counts);
    for (const token of answer.tokens) {
      if (last) throw remoteError(url, `sent more than the ${options.maxTokens} tokens asked for`);
      if (options.stopTokens.includes(token.id)) return "stop";
      if (!started && token.text) {
        started = true;
        token.text = firstText(token.text);
      }
      progress.token();
      if (progress.generatedTokens === options.maxTokens) last = token;
      else yield token;
    }
    finish ??= answer.finish;
  }
}

/** Full-vocabulary log-probabilities from a one-token answer's alternatives; ids never listed stay -Infinity. */
function distribution(token: Token, vocabSize: number): Float32Array {
  const logits = new Float32Array(vocabSize).fill(-Infinity);
  for (const alt of token.topLogprobs ?? []) if (alt.id >= 0 && alt.id < vocabSize) logits[alt.id] = alt.logprob;
  return logits;
}
