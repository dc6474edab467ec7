import { parseArgs } from "node:util";
import { InferenceError } from "@infer/core";
import type { CliIO } from "./io.js";

export interface OptionSpec {
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  /** Shown in --help; the value name follows the flag for string options. */
  description: string;
  value?: string;
}

export type OptionSpecs = Record<string, OptionSpec>;
export type ParsedValues = Record<string, string | boolean | string[] | undefined>;

export interface CommandContext {
  io: CliIO;
  values: ParsedValues;
  positionals: string[];
}

export interface Command {
  name: string;
  /** e.g. "<model> [prompt]" */
  usage: string;
  summary: string;
  /** Extra help text after the options. */
  details?: string;
  options: OptionSpecs;
  run(context: CommandContext): Promise<number>;
}

export const COMMON_OPTIONS: OptionSpecs = {
  help: { type: "boolean", short: "h", description: "show this help" },
  verbose: { type: "boolean", short: "v", description: "print stack traces and extra diagnostics" },
};

export function usageError(message: string, command?: string): InferenceError {
  return new InferenceError("INVALID_OPTION", `${message}; see \`infer ${command ? `${command} ` : ""}--help\``, { details: { usage: true } });
}

/**
 * util.parseArgs takes `-1` after `-n` for another flag ("argument is
 * ambiguous"); a negative number after a flag that takes a value is that
 * flag's value, so it is joined to it (`--max-tokens=-1`) and refused later
 * with the flag's own range.
 */
function joinNegativeValues(argv: string[], options: OptionSpecs): string[] {
  const takesValue = (arg: string) => {
    const long = /^--([^=]+)$/.exec(arg)?.[1];
    if (long !== undefined) return options[long]?.type === "string" ? long : undefined;
    const short = /^-(\w)$/.exec(arg)?.[1];
    return Object.entries(options).find(([, spec]) => spec.short === short && spec.type === "string")?.[0];
  };
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") return [...out, ...argv.slice(i)];
    const name = takesValue(arg);
    const next = argv[i + 1];
    if (name !== undefined && next !== undefined && /^-(\d|\.\d)/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** util.parseArgs with our option specs; its errors become INVALID_OPTION naming the command. */
export function parse(command: Command, argv: string[]): { values: ParsedValues; positionals: string[] } {
  const options = { ...COMMON_OPTIONS, ...command.options };
  try {
    const { values, positionals } = parseArgs({
      args: joinNegativeValues(argv, options),
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries(
        Object.entries(options).map(([name, spec]) => [
          name,
          { type: spec.type, multiple: spec.multiple === true, ...(spec.short ? { short: spec.short } : {}) },
        ]),
      ),
    });
    return { values: values as ParsedValues, positionals };
  } catch (error) {
    throw usageError((error as Error).message.split("\n")[0]!.replace(/\. To specify a positional.*$/, ""), command.name);
  }
}

export function helpText(command: Command): string {
  const options = { ...command.options, ...COMMON_OPTIONS };
  const flags = Object.entries(options).map(([name, spec]) => {
    const flag = `${spec.short ? `-${spec.short}, ` : "    "}--${name}${spec.type === "string" ? ` <${spec.value ?? "value"}>` : ""}`;
    return [flag, spec.description + (spec.multiple ? " (repeatable)" : "")] as const;
  });
  const width = Math.max(...flags.map(([f]) => f.length));
  return [
    `Usage: infer ${command.name} ${command.usage}`.trimEnd(),
    "",
    command.summary,
    "",
    "Options:",
    ...flags.map(([f, d]) => `  ${f.padEnd(width)}  ${d}`),
    ...(command.details ? ["", command.details] : []),
    "",
  ].join("\n");
}

/** Reads an optional numeric flag, refusing text that is not a number or a number outside [min, max]. */
export function numberFlag(
  values: ParsedValues,
  name: string,
  command: string,
  integer = false,
  min = -Infinity,
  max = Infinity,
): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
    const range = max < Infinity ? ` in [${min}, ${max}]` : min > -Infinity ? ` >= ${min}` : "";
    throw usageError(`--${name} must be ${integer ? "an integer" : "a number"}${range} (got ${JSON.stringify(raw)})`, command);
  }
  return value;
}

export const stringFlag = (values: ParsedValues, name: string): string | undefined =>
  typeof values[name] === "string" ? (values[name] as string) : undefined;

export const listFlag = (values: ParsedValues, name: string): string[] =>
  Array.isArray(values[name]) ? (values[name] as string[]) : [];
