import type { Message, TextModel } from "@infer/core";
import { type Command, stringFlag, usageError } from "../command.js";
import { readAll, withInterrupt, write } from "../io.js";
import { generateOptionsOf, ISOLATE_FLAG, LOAD_FLAGS, loadOptionsOf, openModel, requireChatTemplate, SAMPLING_FLAGS } from "../models.js";

export const runCommand: Command = {
  name: "run",
  usage: "<model> [prompt]",
  summary: "Generates text from a prompt and streams it to stdout (diagnostics go to stderr). Without a prompt argument the prompt is read from stdin.",
  details: [
    "<model> is a .gguf file, a Hugging Face folder, an alias (see `infer ls --aliases`) or hf:org/repo[:Q8_0|:file.gguf].",
    "Examples:",
    '  infer run ./stories260K.gguf "Once upon a time" --max-tokens 50 --temperature 0',
    '  echo "Why is the sky blue?" | infer run qwen2.5-0.5b --chat --system "Answer briefly."',
  ].join("\n"),
  options: {
    ...SAMPLING_FLAGS,
    ...LOAD_FLAGS,
    ...ISOLATE_FLAG,
    system: { type: "string", value: "text", description: "system message (implies --chat)" },
    chat: { type: "boolean", description: "wrap the prompt in the model's chat template" },
    json: { type: "boolean", description: "print one JSON object: text, finishReason, metrics" },
  },
  async run(ctx) {
    const [spec, promptArg, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "run");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")} (quote the prompt)`, "run");
    const options = await generateOptionsOf(ctx, "run");
    const system = stringFlag(ctx.values, "system");
    const asChat = ctx.values.chat === true || system !== undefined;
    const { io } = ctx;
    const { model } = await openModel(spec, io, loadOptionsOf(ctx, "run"), ctx.values.verbose === true);
    try {
      if (asChat) requireChatTemplate(model, spec, options.chatTemplate, "; without --chat and --system, `infer run` continues the prompt as plain text");
      const prompt = promptArg ?? (await readAll(io.stdin));
      const messages: Message[] = [...(system !== undefined ? [{ role: "system" as const, content: system }] : []), { role: "user", content: prompt }];
      if (ctx.values.json === true) {
        const { value: result, interrupted } = await withInterrupt(io, (signal) =>
          asChat ? model.chatText(messages, { ...options, signal }) : model.generateText(prompt, { ...options, signal }),
        );
        const { text, finishReason, metrics } = result;
        await write(io.stdout, JSON.stringify({ text, finishReason, metrics, backend: model.backend, model: spec }) + "\n");
        return interrupted ? 130 : 0;
      }
      const { value: interrupted } = await withInterrupt(io, (signal) => streamTo(model, io.stdout, asChat ? messages : prompt, { ...options, signal }));
      await write(io.stdout, "\n");
      return interrupted ? 130 : 0;
    } finally {
      await model.close();
    }
  },
};

/** Streams tokens to `out`; returns true when the stream was interrupted. */
async function streamTo(
  model: TextModel,
  out: NodeJS.WritableStream,
  input: string | Message[],
  options: Parameters<TextModel["generate"]>[1] & { signal: AbortSignal },
): Promise<boolean> {
  const tokens = typeof input === "string" ? model.generate(input, options) : model.chat(input, options);
  try {
    for await (const token of tokens) if (token.text) await write(out, token.text);
    return false;
  } catch (error) {
    if (options.signal.aborted) return true;
    throw error;
  }
}
