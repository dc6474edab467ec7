import { createInterface } from "node:readline";
import type { Message } from "@infer/core";
import { type Command, stringFlag, usageError } from "../command.js";
import { write } from "../io.js";
import { generateOptionsOf, ISOLATE_FLAG, LOAD_FLAGS, loadOptionsOf, openModel, requireChatTemplate, SAMPLING_FLAGS } from "../models.js";

export const chatCommand: Command = {
  name: "chat",
  usage: "<model>",
  summary: "Chats with a model, keeping the conversation. Type /reset to forget it, /exit (or Ctrl-D) to leave. Ctrl-C stops the current answer; at the prompt it quits.",
  options: {
    ...SAMPLING_FLAGS,
    ...LOAD_FLAGS,
    ...ISOLATE_FLAG,
    system: { type: "string", value: "text", description: "system message at the start of the conversation" },
  },
  async run(ctx) {
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "chat");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "chat");
    const { io } = ctx;
    const options = await generateOptionsOf(ctx, "chat");
    const system = stringFlag(ctx.values, "system");
    const fresh = (): Message[] => (system !== undefined ? [{ role: "system", content: system }] : []);
    const { model } = await openModel(spec, io, loadOptionsOf(ctx, "chat"), ctx.values.verbose === true);
    try {
      requireChatTemplate(model, spec, options.chatTemplate);
    } catch (error) {
      await model.close();
      throw error;
    }
    const terminal = io.stdin.isTTY === true && io.stdout.isTTY === true;
    const rl = createInterface({ input: io.stdin, output: terminal ? io.stdout : undefined, terminal, prompt: "> " });
    let history = fresh();
    let answering: AbortController | undefined;
    let quit = false;
    const onInterrupt = () => {
      if (answering) answering.abort(new Error("interrupted (Ctrl-C)"));
      else {
        quit = true;
        rl.close();
      }
    };
    rl.on("SIGINT", onInterrupt); // a terminal's Ctrl-C arrives here, not as a process signal
    io.signals.on("SIGINT", onInterrupt);
    if (terminal) io.stderr.write(`Chatting with ${spec} (backend ${model.backend}). /reset clears the conversation, /exit quits.\n`);
    try {
      if (terminal) rl.prompt();
      for await (const line of rl) {
        const text = line.trim();
        if (text === "/exit" || text === "/quit") break;
        if (text === "/reset") {
          history = fresh();
          io.stderr.write("(conversation cleared)\n");
        } else if (text.length > 0) {
          history.push({ role: "user", content: line });
          answering = new AbortController();
          let answer = "";
          try {
            for await (const token of model.chat(history, { ...options, signal: answering.signal })) {
              answer += token.text;
              await write(io.stdout, token.text);
            }
          } catch (error) {
            if (!answering.signal.aborted) throw error;
            io.stderr.write("\n(answer stopped)");
          } finally {
            answering = undefined;
          }
          await write(io.stdout, "\n");
          history.push({ role: "assistant", content: answer });
        }
        if (quit) break;
        if (terminal) rl.prompt();
      }
    } finally {
      io.signals.off("SIGINT", onInterrupt);
      rl.close();
      await model.close();
    }
    return 0;
  },
};
