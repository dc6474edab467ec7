import { InferenceError, isInferenceError } from "@infer/core";
import { benchCommand } from "./commands/bench.js";
import { chatCommand } from "./commands/chat.js";
import { convertCommand } from "./commands/convert.js";
import { convertLoraCommand, mergeCommand } from "./commands/lora.js";
import { infoCommand } from "./commands/info.js";
import { lsCommand } from "./commands/ls.js";
import { pullCommand } from "./commands/pull.js";
import { rmCommand } from "./commands/rm.js";
import { runCommand } from "./commands/run.js";
import { serveCommand } from "./commands/serve.js";
import { trainCommand } from "./commands/train.js";
import { webCommand } from "./commands/web.js";
import { type Command, helpText, parse, usageError } from "./command.js";
import { type CliIO, processIO } from "./io.js";

export const COMMANDS: Command[] = [runCommand, chatCommand, serveCommand, webCommand, pullCommand, lsCommand, infoCommand, rmCommand, benchCommand, convertCommand, convertLoraCommand, mergeCommand, trainCommand];

/** What to do next, per error code, when the message itself does not say. */
const HINTS: Partial<Record<InferenceError["code"], string>> = {
  BACKEND_NOT_FOUND: "install a backend package (@infer/wasm, @infer/llama-cpp) or drop --backend",
  BACKEND_UNAVAILABLE: "pick another with --backend, or run without it",
  NO_BACKEND_FOR_FORMAT: "check the file is a GGUF or a Hugging Face folder, or pick a backend with --backend",
  UNSUPPORTED_ARCHITECTURE: "try another backend with --backend",
  CONTEXT_OVERFLOW: "shorten the prompt or raise --context",
  NO_CHAT_TEMPLATE: "give a Jinja template with --chat-template <file|text>",
};

function globalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "Usage: infer <command> [options]",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary.split(". ")[0]!.replace(/\.$/, "")}`),
    "",
    "A <model> is a .gguf file, a Hugging Face folder, an alias (infer ls --aliases) or hf:org/repo[:Q8_0|:file.gguf].",
    "Run `infer <command> --help` for a command's options. Environment: INFER_CACHE, HF_ENDPOINT, HF_TOKEN.",
    "",
  ].join("\n");
}

/** Runs the CLI with `argv` (without node and the script); resolves with the exit code. */
export async function main(argv: string[], io: CliIO = processIO()): Promise<number> {
  const [name, ...rest] = argv;
  const verbose = rest.includes("--verbose") || rest.includes("-v");
  try {
    if (name === undefined || name === "--help" || name === "-h" || name === "help") {
      const topic = name === "help" ? COMMANDS.find((c) => c.name === rest[0]) : undefined;
      io.stdout.write(topic ? helpText(topic) : globalHelp());
      return name === undefined ? 1 : 0;
    }
    if (name === "--version") {
      io.stdout.write("infer 0.1.0\n");
      return 0;
    }
    const command = COMMANDS.find((c) => c.name === name);
    if (!command) throw usageError(`unknown command '${name}' (commands: ${COMMANDS.map((c) => c.name).join(", ")})`);
    const { values, positionals } = parse(command, rest);
    if (values.help === true) {
      io.stdout.write(helpText(command));
      return 0;
    }
    return await command.run({ io, values, positionals });
  } catch (error) {
    io.stderr.write(describeError(error, verbose));
    return isInferenceError(error) && error.details.usage === true ? 2 : 1;
  }
}

/** One line: the code, the message and what to do; with --verbose the stack and causes follow. */
export function describeError(error: unknown, verbose: boolean): string {
  const code = isInferenceError(error) ? error.code : "INTERNAL";
  const message = error instanceof Error ? error.message : String(error);
  const hint = isInferenceError(error) ? HINTS[error.code] : "rerun with --verbose and report the stack trace";
  let text = `infer: error ${code}: ${message}${hint ? ` (${hint})` : ""}\n`;
  if (verbose && error instanceof Error) {
    text += `${error.stack ?? ""}\n`;
    for (let cause = error.cause; cause instanceof Error; cause = cause.cause) text += `caused by: ${cause.stack ?? cause.message}\n`;
  }
  return text;
}
