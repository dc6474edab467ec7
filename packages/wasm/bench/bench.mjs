#!/usr/bin/env node
// End-to-end speed of backend "wasm" against llama.cpp (node-llama-cpp directly,
// CPU only) on the same GGUF files, side by side in one run. Not a test.
//
//   npm run bench -- [model.gguf|folder ...] [--json] [--threads N[,M]] [--runs N]
//                    [--models smollm2,qwen25,llama32] [--types q8_0,q4_0,f16,q5_0,q5_1] [--no-llama]
//                    [--relaxed] [--no-warm-up] [--batch-size N]
//
// --no-warm-up adds ours without the warm-up at load (WasmLoadOptions.warmUp
// false) as an engine of its own: the load time the warm-up costs, and the cold
// decode it spares.
//
// --batch-size sets LoadOptions.batchSize for ours and the context's batchSize
// for llama.cpp (defaults: 128 and 512): most prompt tokens per forward pass.
//
// --relaxed adds our relaxed-SIMD kernels as an engine of their own (with the V8
// flag where the runtime needs one, i.e. Node 20), and pins "ours" to the
// baseline SIMD build; the ratios to llama.cpp stay those of "ours".
//
// With no model argument it benchmarks random-weight models in real shapes
// (bench-models.mjs), written once into .cache/bench-models. Each figure is the
// median of --runs fresh processes (default 3), engines interleaved so a busy
// spell of the machine hits them alike: load time, time to first token (128-token
// prompt), prefill tokens/s at 128 and 512 prompt tokens, decode tokens/s over
// 128 new tokens (greedy, EOS ignored), both warm, the same decode as the first
// run after load ("cold", see measure.mjs) and peak RSS. Build first (`npm run build`).
// Each model file is read through once before its first measurement, so every
// engine loads it from the page cache (the first one to touch a cold file would
// otherwise pay the disk alone; llama.cpp maps the file and would pay it in its first prompt).
import { cpus, loadavg } from "node:os";
import { stat } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { BENCH_SHAPES, BENCH_TYPES, benchModel, DEFAULT_BENCH_TYPES } from "./bench-models.mjs";
import { physicalCoreCount } from "../dist/src/kernels/wasm/cores.js";
import { eachArgument, engineRows, measure, positive, summarize, warmPageCache } from "./runs.mjs";

const root = fileURLToPath(new URL("../../../", import.meta.url));

function parseArguments(argv) {
  const options = {
    json: false,
    runs: 3,
    threads: [physicalCoreCount()],
    models: Object.keys(BENCH_SHAPES),
    types: DEFAULT_BENCH_TYPES,
    llama: true,
    relaxed: false,
    noWarmUp: false,
    paths: [],
  };
  eachArgument(argv, (arg, value, list) => {
    if (arg === "--json") options.json = true;
    else if (arg === "--no-llama") options.llama = false;
    else if (arg === "--relaxed") options.relaxed = true;
    else if (arg === "--no-warm-up") options.noWarmUp = true;
    else if (arg === "--runs") options.runs = positive(arg, value());
    else if (arg === "--threads") options.threads = list().map((item) => positive(arg, item));
    else if (arg === "--batch-size") options.batchSize = positive(arg, value());
    else if (arg === "--models") options.models = list();
    else if (arg === "--types") options.types = list();
    else if (arg.startsWith("--")) throw new Error(`unknown option ${arg}`);
    else options.paths.push(arg);
  });
  for (const model of options.models) if (!BENCH_SHAPES[model]) throw new Error(`unknown --models entry ${model}`);
  for (const type of options.types) if (BENCH_TYPES[type] === undefined) throw new Error(`unknown --types entry ${type}`);
  return options;
}

async function benchOne(label, path, options) {
  const { size } = await stat(path);
  await warmPageCache(path);
  const jobs = [];
  for (const threads of options.threads) jobs.push(["ours", threads]);
  if (options.relaxed) for (const threads of options.threads) jobs.push(["ours-relaxed", threads]);
  if (options.noWarmUp) for (const threads of options.threads) jobs.push(["ours-no-warm-up", threads]);
  if (options.llama) jobs.push(["llama", 1], ["llama", 2]);
  const runs = new Map(jobs.map((job) => [job.join(":"), []]));
  const loadBefore = loadavg()[0];
  for (let run = 0; run < options.runs; run++) {
    for (const [engine, threads] of jobs) {
      const result = await measure(engine, path, threads, options);
      runs.get(`${engine}:${threads}`).push(result);
      if (!options.json) process.stderr.write(result.error ? `  ${result.error}\n` : ".");
    }
  }
  if (!options.json) process.stderr.write("\n");
  const engines = jobs.map(([engine, threads]) => summarize(runs.get(`${engine}:${threads}`)));
  return { model: label, path, fileBytes: size, loadAverage: [loadBefore, loadavg()[0]], engines, ratios: ratios(engines) };
}

/** Ours against llama.cpp: decode vs its best thread setting, prefill vs 2 threads, TTFT and load vs its best. */
function ratios(engines) {
  const ours = engines.filter((e) => !e.error && e.engine.startsWith("ours ("));
  const llama = engines.filter((e) => !e.error && e.engine.startsWith("llama"));
  if (ours.length === 0 || llama.length === 0) return undefined;
  const best = (list, key, lower = false) => list.reduce((a, b) => ((lower ? b[key] < a[key] : b[key] > a[key]) ? b : a));
  const us = best(ours, "decode");
  const llama2 = llama.find((e) => e.threads === 2) ?? best(llama, "prefill512");
  return {
    decodeVsBest: us.decode / best(llama, "decode").decode,
    coldDecodeVsBest: best(ours, "coldDecode").coldDecode / best(llama, "coldDecode").coldDecode,
    prefill512VsTwoThreads: best(ours, "prefill512").prefill512 / llama2.prefill512,
    prefill128VsTwoThreads: best(ours, "prefill128").prefill128 / llama2.prefill128,
    ttftVsBest: best(ours, "ttftMs", true).ttftMs / best(llama, "ttftMs", true).ttftMs,
    loadVsBest: best(ours, "loadMs", true).loadMs / best(llama, "loadMs", true).loadMs,
    peakRssVsModel: us.peakRssBytes / us.modelBytes,
  };
}

function formatTable(result) {
  const lines = engineRows(result, { title: "peak RSS MiB", value: (e) => (e.peakRssBytes / 2 ** 20).toFixed(0) });
  const r = result.ratios;
  if (r) {
    lines.push(
      `ours / llama.cpp: decode ${r.decodeVsBest.toFixed(2)}x its best (cold ${r.coldDecodeVsBest.toFixed(2)}x), prefill512 ${r.prefill512VsTwoThreads.toFixed(2)}x and prefill128 ` +
        `${r.prefill128VsTwoThreads.toFixed(2)}x its 2 threads, TTFT ${r.ttftVsBest.toFixed(2)}x, load ${r.loadVsBest.toFixed(2)}x ` +
        `(lower is better for these two); our peak RSS ${r.peakRssVsModel.toFixed(2)}x weights + KV cache`,
    );
  }
  return lines.join("\n");
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const targets = [];
  if (options.paths.length > 0) {
    for (const path of options.paths) targets.push([path, path]);
  } else {
    const folder = join(root, ".cache", "bench-models");
    for (const model of options.models) {
      for (const type of options.types) targets.push([`${BENCH_SHAPES[model].title} shape, ${type.toUpperCase()}`, await benchModel(folder, model, type)]);
    }
  }
  const machine = {
    cpu: cpus()[0]?.model ?? "unknown",
    logicalCpus: cpus().length,
    physicalCores: physicalCoreCount(),
    node: process.version,
    date: new Date().toISOString(),
  };
  if (!options.json) {
    console.log(`${machine.cpu}, ${machine.physicalCores} physical cores, Node ${machine.node}, ${machine.date}`);
    console.log(`medians of ${options.runs} runs; load average now ${loadavg()[0].toFixed(1)} (figures mean little on a busy machine)`);
    if (options.batchSize) console.log(`batch size ${options.batchSize} for both engines`);
  }
  const results = [];
  for (const [label, path] of targets) {
    const result = await benchOne(label, path, options);
    results.push(result);
    if (!options.json) console.log(formatTable(result));
  }
  if (options.json) console.log(JSON.stringify({ machine, runs: options.runs, batchSize: options.batchSize, results }, null, 2));
}

main().catch((error) => {
  console.error(error.message ?? error);
  process.exit(1);
});
