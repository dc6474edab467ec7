import type { TextModel } from "@infer/core";
import { type Command, numberFlag, stringFlag, usageError } from "../command.js";
import { formatBytes, formatPairs } from "../format.js";
import { write } from "../io.js";
import { LOAD_FLAGS, loadOptionsOf, openModel } from "../models.js";

const DEFAULT_PROMPT =
  "The old lighthouse keeper climbed the spiral stairs every evening, counting each of the one hundred and twelve steps, " +
  "and when he reached the lamp room he wiped the salt from the glass and watched the ships pass in the dark.";

export interface BenchRun {
  promptTokens: number;
  generatedTokens: number;
  timeToFirstTokenMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  totalMs: number;
}

export interface BenchReport {
  model: string;
  backend: string;
  loadMs: number;
  runs: BenchRun[];
  /** Medians over the runs. */
  timeToFirstTokenMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** The backend's own peak for this model (0 when it does not say). */
  peakModelMemoryBytes: number;
  /** The process's peak resident set size. */
  peakRssBytes: number;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** One timed generation: greedy, EOS ignored so every run decodes the same number of tokens. */
export async function benchOnce(model: TextModel, prompt: string, maxTokens: number): Promise<BenchRun> {
  const started = performance.now();
  let first = 0;
  let generated = 0;
  for await (const _token of model.generate(prompt, { maxTokens, temperature: 0, ignoreEos: true })) {
    if (generated++ === 0) first = performance.now() - started;
  }
  const m = model.metrics();
  return {
    promptTokens: m.promptTokens,
    generatedTokens: generated,
    timeToFirstTokenMs: first,
    prefillTokensPerSec: m.prefillTokensPerSec,
    decodeTokensPerSec: m.decodeTokensPerSec,
    totalMs: performance.now() - started,
  };
}

export const benchCommand: Command = {
  name: "bench",
  usage: "<model>",
  summary: "Measures load time, time to first token, prefill and decode speed (tokens/s) and peak memory.",
  options: {
    ...LOAD_FLAGS,
    prompt: { type: "string", value: "text", description: "prompt to prefill (default: a ~45-token paragraph)" },
    "max-tokens": { type: "string", short: "n", value: "n", description: "tokens to decode per run (default 128)" },
    runs: { type: "string", value: "n", description: "timed runs after one warm-up; medians are reported (default 3)" },
    json: { type: "boolean", description: "print the report as JSON" },
  },
  async run(ctx) {
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "bench");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "bench");
    const maxTokens = numberFlag(ctx.values, "max-tokens", "bench", true) ?? 128;
    const runs = numberFlag(ctx.values, "runs", "bench", true) ?? 3;
    if (maxTokens < 1 || runs < 1) throw usageError("--max-tokens and --runs must be at least 1", "bench");
    const prompt = stringFlag(ctx.values, "prompt") ?? DEFAULT_PROMPT;
    // Every run sends the same prompt: with prefix reuse on, runs after the first would evaluate one token of it.
    const loadOptions = { promptCacheBytes: 0, ...loadOptionsOf(ctx, "bench") };
    const { model, loadMs } = await openModel(spec, ctx.io, loadOptions, ctx.values.verbose === true);
    try {
      await benchOnce(model, prompt, Math.min(8, maxTokens)); // warm-up: first-call allocations and JIT
      const results: BenchRun[] = [];
      for (let i = 0; i < runs; i++) results.push(await benchOnce(model, prompt, maxTokens));
      const report: BenchReport = {
        model: spec,
        backend: model.backend,
        loadMs,
        runs: results,
        timeToFirstTokenMs: median(results.map((r) => r.timeToFirstTokenMs)),
        prefillTokensPerSec: median(results.map((r) => r.prefillTokensPerSec)),
        decodeTokensPerSec: median(results.map((r) => r.decodeTokensPerSec)),
        peakModelMemoryBytes: model.metrics().peakMemoryBytes,
        peakRssBytes: process.resourceUsage().maxRSS * 1024,
      };
      if (ctx.values.json === true) {
        await write(ctx.io.stdout, JSON.stringify(report) + "\n");
        return 0;
      }
      await write(
        ctx.io.stdout,
        formatPairs([
          ["model", spec],
          ["backend", model.backend],
          ["load time", `${loadMs.toFixed(0)} ms`],
          ["prompt tokens", String(results[0]!.promptTokens)],
          ["generated tokens", `${results[0]!.generatedTokens} x ${runs} runs`],
          ["time to first token", `${report.timeToFirstTokenMs.toFixed(1)} ms`],
          ["prefill", `${report.prefillTokensPerSec.toFixed(1)} tokens/s`],
          ["decode", `${report.decodeTokensPerSec.toFixed(1)} tokens/s`],
          ["peak model memory", report.peakModelMemoryBytes ? formatBytes(report.peakModelMemoryBytes) : "not reported"],
          ["peak process RSS", formatBytes(report.peakRssBytes)],
        ]),
      );
      return 0;
    } finally {
      await model.close();
    }
  },
};
