import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3FinishReason,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
  LanguageModelV3StreamResult,
  LanguageModelV3Usage,
  SharedV3Warning,
} from "@ai-sdk/provider";
import { capabilitiesOf, type FinishReason, type GenerateOptions, isInferenceError, type Message, type ModelLease, type TextModel, type Token } from "@infer/core";
import { toMessages, toPlainPrompt } from "./prompt.js";

/** How a prompt reaches the model: its chat template, plain text, or chat falling back to text when the model has no template. */
export type PromptMode = "chat" | "completion" | "auto";

export interface InferModelSettings {
  /** Default "auto". */
  promptMode?: PromptMode;
  /** Defaults applied under each call's options (minP, repeatPenalty, ...). */
  defaults?: GenerateOptions;
}

/** infer's own per-call options: `providerOptions: { infer: { minP: 0.1 } }`. */
const PROVIDER_KEYS = ["minP", "repeatPenalty", "repeatLastN", "topK", "grammar"] as const;

function finishReason(reason: FinishReason | "length-guess"): LanguageModelV3FinishReason {
  switch (reason) {
    case "length":
    case "length-guess":
      return { unified: "length", raw: "length" };
    case "error":
      return { unified: "error", raw: "error" };
    case "abort":
      return { unified: "other", raw: "abort" };
    default:
      return { unified: "stop", raw: "stop" };
  }
}

function usage(promptTokens: number | undefined, outputTokens: number): LanguageModelV3Usage {
  return {
    inputTokens: { total: promptTokens, noCache: promptTokens, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: outputTokens, text: outputTokens, reasoning: undefined },
  };
}

function abortError(signal: AbortSignal): Error {
  if (signal.reason instanceof Error) return signal.reason;
  const error = new Error("the generation was aborted");
  error.name = "AbortError";
  return error;
}

/**
 * An infer TextModel seen as an AI SDK LanguageModelV3, running in this process.
 * Each call holds the model from `acquire` until its text (or stream) ends, so a
 * model service does not unload it mid-call and may unload it between calls.
 */
export class InferLanguageModel implements LanguageModelV3 {
  readonly specificationVersion = "v3";
  readonly provider = "infer";
  readonly supportedUrls: Record<string, RegExp[]> = {};

  constructor(
    readonly modelId: string,
    private readonly acquire: () => Promise<ModelLease>,
    private readonly settings: InferModelSettings = {},
  ) {}

  /** Turns the SDK's call options into generate options and warnings for what the model cannot honour. */
  private async prepare(call: LanguageModelV3CallOptions) {
    const lease = await this.acquire();
    try {
      return { release: lease.release, ...this.optionsFor(lease.model, call) };
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  private optionsFor(model: TextModel, call: LanguageModelV3CallOptions) {
    const warnings: SharedV3Warning[] = [];
    const options: GenerateOptions = {
      ...this.settings.defaults,
      maxTokens: call.maxOutputTokens,
      temperature: call.temperature,
      topP: call.topP,
      topK: call.topK,
      seed: call.seed,
      stopStrings: call.stopSequences?.length ? call.stopSequences : undefined,
    };
    const own = call.providerOptions?.infer as Record<string, unknown> | undefined;
    for (const key of PROVIDER_KEYS) if (own?.[key] !== undefined) (options as Record<string, unknown>)[key] = own[key];
    for (const [feature, value] of [
      ["presencePenalty", call.presencePenalty],
      ["frequencyPenalty", call.frequencyPenalty],
    ] as const) {
      if (value !== undefined) warnings.push({ type: "unsupported", feature, details: "use providerOptions.infer.repeatPenalty" });
    }
    if (call.tools?.length) warnings.push({ type: "unsupported", feature: "tools", details: "infer models do not call tools" });
    if (call.responseFormat?.type === "json") {
      if (capabilitiesOf(model).grammar === "supported") options.jsonSchema = (call.responseFormat.schema as object | undefined) ?? { type: "object" };
      else warnings.push({ type: "unsupported", feature: "responseFormat", details: `backend ${model.backend} cannot constrain output to JSON` });
    }
    const messages = toMessages(call.prompt, warnings);
    return { model, warnings, options, messages };
  }

  /**
   * Starts the token stream in the configured prompt mode. In "auto", a model
   * without a chat template gets the flattened text instead (with a warning).
   */
  private async *tokens(model: TextModel, messages: Message[], options: GenerateOptions, warnings: SharedV3Warning[]): AsyncGenerator<Token> {
    const mode = this.settings.promptMode ?? "auto";
    if (mode === "completion") {
      yield* model.generate(toPlainPrompt(messages), options);
      return;
    }
    const chat = model.chat(messages, options)[Symbol.asyncIterator]();
    let first: IteratorResult<Token>;
    try {
      first = await chat.next();
    } catch (error) {
      if (mode === "chat" || !isInferenceError(error, "NO_CHAT_TEMPLATE")) throw error;
      warnings.push({ type: "compatibility", feature: "chat template", details: "the model has no chat template; the messages were sent as plain text" });
      yield* model.generate(toPlainPrompt(messages), options);
      return;
    }
    try {
      if (first.done) return;
      yield first.value;
      for (let step = await chat.next(); !step.done; step = await chat.next()) yield step.value;
    } finally {
      // A consumer that stops early must still end the model's call, or the model stays busy.
      await chat.return?.(undefined);
    }
  }

  async doGenerate(call: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
    const { model, warnings, options, messages, release } = await this.prepare(call);
    const signal = call.abortSignal;
    let text = "";
    let count = 0;
    try {
      for await (const token of this.tokens(model, messages, { ...options, signal }, warnings)) {
        text += token.text;
        count++;
      }
      const reason = options.maxTokens !== undefined && count >= options.maxTokens ? "length" : "stop";
      return {
        content: text ? [{ type: "text", text }] : [],
        finishReason: finishReason(reason),
        usage: usage(model.metrics().promptTokens, count),
        warnings,
        response: { modelId: this.modelId, timestamp: new Date() },
      };
    } catch (error) {
      if (signal?.aborted) throw abortError(signal);
      throw error;
    } finally {
      release();
    }
  }

  async doStream(call: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
    const { model, warnings, options, messages, release } = await this.prepare(call);
    // Cancelling the stream (the consumer stopped reading) stops the generation too.
    const stop = new AbortController();
    const signal = call.abortSignal ? AbortSignal.any([call.abortSignal, stop.signal]) : stop.signal;
    const tokens = this.tokens(model, messages, { ...options, signal }, warnings);
    let started = false;
    let count = 0;
    const stream = new ReadableStream<LanguageModelV3StreamPart>({
      start: (controller) => {
        controller.enqueue({ type: "stream-start", warnings });
        controller.enqueue({ type: "response-metadata", modelId: this.modelId, timestamp: new Date() });
      },
      pull: async (controller) => {
        try {
          const step = await tokens.next();
          if (!step.done) {
            if (!started) {
              started = true;
              controller.enqueue({ type: "text-start", id: "text-0" });
            }
            count++;
            if (step.value.text) controller.enqueue({ type: "text-delta", id: "text-0", delta: step.value.text });
            return;
          }
          if (started) controller.enqueue({ type: "text-end", id: "text-0" });
          const reason = options.maxTokens !== undefined && count >= options.maxTokens ? "length" : "stop";
          controller.enqueue({ type: "finish", finishReason: finishReason(reason), usage: usage(model.metrics().promptTokens, count) });
          controller.close();
          release();
        } catch (error) {
          release();
          if (call.abortSignal?.aborted) {
            controller.error(abortError(call.abortSignal));
            return;
          }
          controller.enqueue({ type: "error", error });
          controller.enqueue({ type: "finish", finishReason: finishReason("error"), usage: usage(undefined, count) });
          controller.close();
        }
      },
      cancel: async () => {
        stop.abort(new Error("the stream was cancelled"));
        try {
          await tokens.return(undefined);
        } finally {
          release();
        }
      },
    });
    return { stream };
  }
}
