#!/usr/bin/env node
// Streams a model's continuation of a prompt to stdout: the smallest end-to-end use of infer.
//
//   npm run example -- <model path> [prompt] [--max-tokens N] [--temperature T] [--seed S] [--backend NAME]
//   npm run example -- ../shared/models/stories260K/stories260K.gguf "Once upon a time"
//
// Backends register themselves when imported. Each is imported on its own so a
// backend that is not built or cannot load here does not stop the others.
import { isInferenceError, listBackends, loadModel } from "@infer/core";
import "@infer/core/node";

const BACKEND_PACKAGES = ["@infer/wasm", "@infer/llama-cpp"];
const USAGE =
  "usage: npm run example -- <model path> [prompt] [--max-tokens N] [--temperature T] [--seed S] [--backend NAME]";

function parseArgs(argv) {
  const positional = [];
  const options = { maxTokens: 128 };
  const flags = {
    "--max-tokens": (v) => (options.maxTokens = Number(v)),
    "--temperature": (v) => (options.temperature = Number(v)),
    "--seed": (v) => (options.seed = Number(v)),
    "--backend": (v) => (options.backend = v),
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") return undefined;
    if (flags[arg]) {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      flags[arg](argv[++i]);
    } else positional.push(arg);
  }
  if (positional.length < 1 || positional.length > 2) return undefined;
  return { path: positional[0], prompt: positional[1] ?? "", options };
}

async function importBackends() {
  const missing = [];
  for (const name of BACKEND_PACKAGES) {
    try {
      await import(name);
    } catch (error) {
      missing.push(`${name}: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
    }
  }
  return missing;
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`${error.message}\n${USAGE}`);
    return 2;
  }
  if (!args) {
    console.error(USAGE);
    return 2;
  }
  const missing = await importBackends();
  const { backend, ...generateOptions } = args.options;

  let model;
  try {
    model = await loadModel(args.path, backend ? { backend } : {});
  } catch (error) {
    report(error);
    console.error(`registered backends: ${listBackends().join(", ") || "none"}`);
    for (const line of missing) console.error(`not loaded: ${line}`);
    return 1;
  }

  // Ctrl-C stops generation cleanly instead of killing the process mid-token.
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort("interrupted"));
  try {
    process.stdout.write(args.prompt);
    for await (const token of model.generate(args.prompt, { ...generateOptions, signal: controller.signal })) {
      process.stdout.write(token.text);
    }
    process.stdout.write("\n");
  } catch (error) {
    process.stdout.write("\n");
    if (!isInferenceError(error, "ABORTED")) {
      report(error);
      await model.close();
      return 1;
    }
  }
  const m = model.metrics();
  console.error(
    `[${model.backend} ${model.modelType}] ${m.promptTokens} prompt tokens, ${m.generatedTokens} generated; ` +
      `prefill ${m.prefillTokensPerSec.toFixed(1)} tok/s, decode ${m.decodeTokensPerSec.toFixed(1)} tok/s, ${m.totalMs.toFixed(0)} ms`,
  );
  await model.close();
  return 0;
}

function report(error) {
  if (isInferenceError(error)) console.error(`error ${error.code}: ${error.message}`);
  else console.error(error);
}

process.exitCode = await main();
