import {
  BaseTextModel,
  type ClassifyResult,
  type FinishReason,
  InferenceError,
  makeMetrics,
  type Message,
  type ModelInfo,
  type PromptInput,
  type ResolvedGenerateOptions,
  type Token,
} from "@infer/core";

export const ANSWER = ["The", " sky", " is", " blue", "."];

/** A scripted TextModel; `withTemplate: false` behaves like a base model without a chat template. */
export class FakeModel extends BaseTextModel {
  readonly modelType = "fake";
  readonly backend = "fake";
  prompts: string[] = [];
  lastOptions: ResolvedGenerateOptions | undefined;
  aborts = 0;

  constructor(
    private readonly withTemplate = true,
    private readonly answer: string[] = ANSWER,
    private readonly delayMs = 0,
  ) {
    super();
  }

  info(): ModelInfo {
    return { architecture: "fake", vocabSize: 8, numLayers: 1, hiddenSize: 4, contextLength: 64, quantBits: 32, quantGroup: 0, format: "unknown" };
  }

  protected async *stream(input: PromptInput, options: ResolvedGenerateOptions, signal: AbortSignal): AsyncGenerator<Token, FinishReason> {
    this.prompts.push(input.text);
    this.lastOptions = options;
    let produced = 0;
    try {
      for (const [id, text] of this.answer.entries()) {
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        produced++;
        yield { id, text };
      }
      return "stop";
    } finally {
      if (signal.aborted) this.aborts++;
      this.lastMetrics = makeMetrics({ promptTokens: input.text.length, generatedTokens: produced, prefillMs: 1, decodeMs: 1, totalMs: 2 });
    }
  }

  protected renderChat(messages: Message[]): string {
    if (!this.withTemplate) throw new InferenceError("NO_CHAT_TEMPLATE", "this model has no chat template");
    return messages.map((m) => `[${m.role}] ${m.content}`).join("\n") + "\n[assistant] ";
  }
  protected async runClassify(): Promise<ClassifyResult[]> {
    return [];
  }
  protected async runBatch(): Promise<void> {}
  protected async dispose(): Promise<void> {}
}
