// @infer/cli: the `infer` command line, also callable in-process (tests, embedding).
export { COMMANDS, describeError, main } from "./main.js";
export type { Command, CommandContext } from "./command.js";
export type { CliIO } from "./io.js";
export { servedName } from "./commands/serve.js";
export { benchOnce, type BenchReport, type BenchRun } from "./commands/bench.js";
export { convertHfToGguf, CONVERTIBLE_MODEL_TYPES, OUTPUT_TYPES, type ConvertResult, type OutputType } from "./convert/index.js";
