/**
 * A deterministic toy backend for core's tests. Its vocabulary is characters;
 * the logits of the next token are a fixed hash of the last two ids, so every
 * output is reproducible without weights, and tests can compute expectations
 * independently through `FakeModel.nextLogits`.
 */
import {
  abortedError,
  BaseTextModel,
  type Backend,
  type ClassifyOptions,
  type ClassifyResult,
  type BatchSink,
  type CapabilityId,
  type CapabilityStatus,
  type DecodeOptions,
  type EncodeOptions,
  type FinishReason,
  InferenceError,
  type LoadOptions,
  makeMetrics,
  type Message,
  type ModelInfo,
  type PromptInput,
  randomSeed,
  type ResolvedGenerateOptions,
  decodeInto,
  type Token,
  type TokenizerModel,
} from "../src/index.js";
import { seededRandom } from "../src/testing/random.js";

export const BOS = 0;
export const EOS = 1;
const SPECIAL = ["<s>", "</s>"];
const CHARS = [..." abcdefghijklmnopqrstuvwxyz.,!?'"];
/** Vocabulary: BOS, EOS, then one token per character. */
export const VOCAB = [...SPECIAL, ...CHARS];
const UNKNOWN = VOCAB.indexOf("?");

export interface FakeModelOptions {
  /** KV cache size in tokens (default 256). */
  contextLength?: number;
  /** Make EOS the most likely token once this many tokens were generated. */
  eosAfter?: number;
  /** Wait this long before each generated token (to test concurrency, abort, close). */
  delayMs?: number;
}

export class FakeModel extends BaseTextModel implements TokenizerModel {
  readonly modelType = "fake";
  readonly backend: string;
  /** Streams running right now, and the most that ever ran at once. */
  active = 0;
  maxActive = 0;
  disposeCount = 0;
  /** True if dispose ran while a stream was still inside the backend. */
  disposedWhileActive = false;
  private readonly contextLength: number;

  constructor(
    backend = "fake",
    private readonly options: FakeModelOptions = {},
  ) {
    super();
    this.backend = backend;
    this.contextLength = options.contextLength ?? 256;
  }

  info(): ModelInfo {
    return {
      architecture: "fake",
      vocabSize: VOCAB.length,
      numLayers: 1,
      hiddenSize: 2,
      contextLength: this.contextLength,
      quantBits: 32,
      quantGroup: 0,
      format: "unknown",
    };
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids = [...text.toLowerCase()].map((c) => {
      const id = CHARS.indexOf(c);
      return id < 0 ? UNKNOWN : id + SPECIAL.length;
    });
    return options.addSpecialTokens === false ? ids : [BOS, ...ids];
  }

  decode(ids: number[], options: DecodeOptions = {}): string {
    return ids
      .filter((id) => !(options.skipSpecialTokens && id < SPECIAL.length))
      .map((id) => VOCAB[id] ?? "")
      .join("");
  }

  applyChatTemplate(messages: Message[], options: { addGenerationPrompt?: boolean; chatTemplate?: string } = {}): string {
    const body = messages.map((m) => `${m.role}: ${m.content}\n`).join("");
    return options.addGenerationPrompt === false ? body : `${body}assistant: `;
  }

  /** The logits after `context`: a hash of its last two ids, EOS boosted after `eosAfter` generated tokens. */
  nextLogits(context: number[], generated: number): Float32Array {
    const logits = new Float32Array(VOCAB.length);
    const a = context.at(-1) ?? 0;
    const b = context.at(-2) ?? 0;
    for (let i = 0; i < logits.length; i++) logits[i] = (hash(a * 131 + b * 7 + i * 977) % 1000) / 125 - 4;
    logits[EOS] = this.options.eosAfter !== undefined && generated >= this.options.eosAfter ? 10 : -10;
    return logits;
  }

  protected async *stream(
    input: PromptInput,
    options: ResolvedGenerateOptions,
    signal: AbortSignal,
  ): AsyncGenerator<Token, FinishReason | void, undefined> {
    const start = performance.now();
    const ids = this.promptIds(input.text);
    const random = seededRandom(options.seed ?? randomSeed());
    const prefillMs = performance.now() - start;
    let generated = 0;
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      while (ids.length < this.contextLength) {
        if (this.options.delayMs) await sleep(this.options.delayMs, signal);
        const id = sample(this.nextLogits(ids, generated), options, random);
        if (!options.ignoreEos && id === EOS) return "stop";
        if (options.stopTokens.includes(id)) return "stop";
        ids.push(id);
        generated++;
        yield { id, text: VOCAB[id]! };
      }
      return "length";
    } finally {
      this.active--;
      const totalMs = performance.now() - start;
      this.lastMetrics = makeMetrics({
        promptTokens: ids.length - generated,
        generatedTokens: generated,
        prefillMs,
        decodeMs: totalMs - prefillMs,
        totalMs,
      });
    }
  }

  protected renderChat(messages: Message[], options: ResolvedGenerateOptions): string {
    if (messages.some((m) => m.content.includes("#notemplate")) && !options.chatTemplate) {
      throw new InferenceError("NO_CHAT_TEMPLATE", "fake model has no chat template for these messages");
    }
    return this.applyChatTemplate(messages);
  }

  protected async runClassify(prompts: string[], options: ClassifyOptions): Promise<ClassifyResult[]> {
    const random = seededRandom(options.seed ?? randomSeed());
    // Classify is greedy unless the options ask for sampling.
    const sampling = { temperature: 0, topK: 0, topP: 1, minP: 0, ...options };
    return prompts.map((prompt) => {
      const logits = this.nextLogits(this.promptIds(prompt), 0);
      const id = sample(logits, sampling, random);
      return { token: { id, text: VOCAB[id]! }, ...(options.logits ? { logits } : {}) };
    });
  }

  protected async runBatch(inputs: PromptInput[], options: ResolvedGenerateOptions, signal: AbortSignal, sink: BatchSink): Promise<void> {
    let decoded = 0;
    const counted: BatchSink = {
      token: (index, token) => (decoded++, sink.token(index, token)),
      end: (index, reason, error) => sink.end(index, reason, error),
    };
    for (const [index, input] of inputs.entries()) {
      if (signal.aborted) throw abortedError(signal.reason);
      await decodeInto(counted, index, async () => this.stream(input, options, signal));
    }
    this.lastMetrics = { ...this.lastMetrics, generatedTokens: decoded };
  }

  protected async dispose(): Promise<void> {
    this.disposeCount++;
    if (this.active > 0) this.disposedWhileActive = true;
  }

  /** Prompt ids; marker words in the prompt make the backend fail the way real ones do. */
  private promptIds(text: string): number[] {
    if (text.includes("#unsupported")) throw new InferenceError("UNSUPPORTED", "fake backend: #unsupported in prompt");
    if (text.includes("#crash")) throw new Error("fake backend crashed");
    const ids = this.encode(text);
    if (ids.length >= this.contextLength) {
      throw new InferenceError(
        "CONTEXT_OVERFLOW",
        `prompt of ${ids.length} tokens does not fit the context of ${this.contextLength}`,
      );
    }
    return ids;
  }
}

/** Temperature, top-k, top-p and min-p sampling; temperature 0 is argmax. */
export function sample(
  logits: Float32Array,
  options: { temperature?: number; topK?: number; topP?: number; minP?: number },
  random: () => number,
): number {
  const temperature = options.temperature ?? 0.8;
  if (temperature === 0) return logits.reduce((best, v, i) => (v > logits[best]! ? i : best), 0);
  let order = [...logits.keys()].sort((x, y) => logits[y]! - logits[x]!);
  if (options.topK) order = order.slice(0, options.topK);
  const weights = order.map((i) => Math.exp((logits[i]! - logits[order[0]!]!) / temperature));
  const total = weights.reduce((s, w) => s + w, 0);
  let keep = order.length;
  const topP = options.topP ?? 1;
  for (let sum = 0, k = 0; k < order.length; k++) {
    sum += weights[k]! / total;
    if (sum >= topP) {
      keep = k + 1;
      break;
    }
  }
  const minWeight = (options.minP ?? 0) * weights[0]!;
  const kept = order.slice(0, keep).filter((_, k) => weights[k]! >= minWeight);
  const keptTotal = kept.reduce((s, _, k) => s + weights[k]!, 0);
  let r = random() * keptTotal;
  for (const [k, id] of kept.entries()) {
    r -= weights[k]!;
    if (r <= 0) return id;
  }
  return kept.at(-1)!;
}

function hash(n: number): number {
  let x = (n ^ 0x9e3779b9) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b) >>> 0;
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

export interface FakeBackendOptions {
  name?: string;
  available?: boolean;
  unavailableReason?: string;
  /** File extension this backend reads (default ".fake"). */
  extension?: string;
  model?: FakeModelOptions;
  capabilities?: Partial<Record<CapabilityId, CapabilityStatus>>;
}

/** Loads any path ending in its extension; paths containing "corrupt" fail with MODEL_FORMAT. */
export class FakeBackend implements Backend {
  readonly name: string;
  readonly capabilities?: Partial<Record<CapabilityId, CapabilityStatus>>;
  readonly loaded: { path: string; options?: LoadOptions }[] = [];
  readonly models: FakeModel[] = [];

  constructor(private readonly options: FakeBackendOptions = {}) {
    this.name = options.name ?? "fake";
    this.capabilities = options.capabilities;
  }

  available(): boolean {
    return this.options.available ?? true;
  }

  unavailableReason(): string {
    return this.options.unavailableReason ?? "fake backend switched off";
  }

  async canLoad(path: string): Promise<boolean> {
    return path.endsWith(this.options.extension ?? ".fake");
  }

  async loadModel(path: string, options?: LoadOptions): Promise<FakeModel> {
    this.loaded.push({ path, options });
    if (path.includes("corrupt")) {
      throw new InferenceError("MODEL_FORMAT", `${path}: not a fake model (bad magic)`, { details: { path } });
    }
    const model = new FakeModel(this.name, this.options.model);
    this.models.push(model);
    return model;
  }
}
