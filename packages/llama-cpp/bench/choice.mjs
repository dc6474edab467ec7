#!/usr/bin/env node
// Decode speed of backends llama_cpp and wasm on the same GGUF files at 1 and 2
// threads and at each one's default, side by side in one run (not a test): the
// measurements behind llama_cpp's default threads and the default backend of a
// GGUF file (docs/llama-cpp.md, "Threads" and "Backend choice").
//
//   npm run bench:choice -- [model.gguf ...] [--runs N] [--tokens N] [--seconds S]
//
// Without a model it runs ../shared/models/stories260K/stories260K.gguf and the
// SmolLM2-135M-shaped Q8_0 and Q4_0 bench models (packages/wasm/bench/bench-models.mjs,
// written once into .cache/bench-models). Each figure is the median over --runs
// rounds (default 3) of a fresh process per engine, engines interleaved within a
// round so that a busy spell of the machine hits them alike. A process loads the
// model through @infer/core's loadModel with the backend pinned, decodes
// --tokens tokens (default 128, greedy, EOS ignored) once to warm up, then
// again, timed, stopping early after --seconds (default 10: a collapsed
// configuration reports its rate over what it reached). Build first.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import { basename, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const ENGINES = [
  ["llama_cpp", "default"],
  ["wasm", "default"],
  ["llama_cpp", 1],
  ["llama_cpp", 2],
  ["wasm", 1],
  ["wasm", 2],
];

if (process.argv[2] === "--child") {
  await child(...process.argv.slice(3));
} else {
  await main(process.argv.slice(2));
}

async function main(argv) {
  const options = { runs: 3, tokens: 128, seconds: 10, paths: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--runs" || arg === "--tokens" || arg === "--seconds") options[arg.slice(2)] = Number(argv[++i]);
    else if (arg.startsWith("--")) throw new Error(`unknown option ${arg} (see the comment at the top of ${basename(fileURLToPath(import.meta.url))})`);
    else options.paths.push(arg);
  }
  if (options.paths.length === 0) {
    const stories = join(root, "..", "shared", "models", "stories260K", "stories260K.gguf");
    if (existsSync(stories)) options.paths.push(stories);
    const { benchModel } = await import("../../wasm/bench/bench-models.mjs");
    for (const type of ["q8_0", "q4_0"]) options.paths.push(await benchModel(join(root, ".cache", "bench-models"), "smollm2", type));
  }
  const rates = new Map();
  for (let round = 1; round <= options.runs; round++) {
    console.error(`round ${round}/${options.runs}, load average ${loadavg()[0].toFixed(1)}`);
    for (const path of options.paths) {
      for (const [backend, threads] of ENGINES) {
        const result = await run(path, backend, threads, options);
        const key = `${path}\t${backend}\t${threads}`;
        rates.set(key, [...(rates.get(key) ?? []), result]);
      }
    }
  }
  for (const path of options.paths) {
    const median = (backend, threads) => {
      const results = rates.get(`${path}\t${backend}\t${threads}`);
      const sorted = results.map((r) => r.tokensPerSec).sort((a, b) => a - b);
      return { rate: sorted[Math.floor(sorted.length / 2)], threads: results[0].threads, backend: results[0].backend };
    };
    const base = median("llama_cpp", "default").rate;
    console.log(`\n${basename(path)} (decode tok/s, median of ${options.runs}; ratio to llama_cpp at its default threads)`);
    for (const [backend, threads] of ENGINES) {
      const { rate, threads: used } = median(backend, threads);
      const label = `${backend} ${threads === "default" ? `default (${used})` : threads}`;
      console.log(`  ${label.padEnd(22)} ${rate.toFixed(1).padStart(8)}  ${(rate / base).toFixed(2)} x`);
    }
    const chosen = rates.get(`${path}\tllama_cpp\tdefault`)[0].defaultBackend;
    console.log(`  default backend for this file: ${chosen}`);
  }
}

function run(path, backend, threads, options) {
  return new Promise((resolve, reject) => {
    const script = fileURLToPath(import.meta.url);
    const args = [script, "--child", path, backend, String(threads), String(options.tokens), String(options.seconds)];
    const proc = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout.on("data", (chunk) => (out += chunk));
    proc.on("error", reject);
    proc.on("close", (code) => {
      if (code !== 0) reject(new Error(`${backend} ${threads} ${path} exited with ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").pop()));
    });
  });
}

async function child(path, backend, threadsArg, tokensArg, secondsArg) {
  const { loadModel } = await import("@infer/core");
  await import("@infer/llama-cpp");
  await import("@infer/wasm");
  const tokens = Number(tokensArg);
  const model = await loadModel(path, {
    backend,
    contextLength: 2 * tokens + 64,
    parallelSlots: 1,
    ...(threadsArg !== "default" && { threads: Number(threadsArg) }),
  });
  const decode = async (deadline) => {
    let first = 0;
    let count = 0;
    for await (const _ of model.generate("Once upon a time", { temperature: 0, ignoreEos: true, maxTokens: tokens })) {
      if (count++ === 0) first = performance.now();
      if (performance.now() > deadline) break;
    }
    return count > 1 ? ((count - 1) * 1000) / (performance.now() - first) : 0;
  };
  await decode(performance.now() + Number(secondsArg) * 1000);
  const tokensPerSec = await decode(performance.now() + Number(secondsArg) * 1000);
  // The wasm model does not report its threads; its default is the physical core count.
  const threads = model.threads ?? (threadsArg === "default" ? (await import("../../wasm/dist/src/kernels/wasm/cores.js")).physicalCoreCount() : Number(threadsArg));
  await model.close();
  let defaultBackend;
  if (backend === "llama_cpp" && threadsArg === "default") {
    // Which backend loadModel picks for this file when none is pinned (the rule being measured).
    const chosen = await loadModel(path, { contextLength: 64, parallelSlots: 1, threads: 1 });
    defaultBackend = chosen.backend;
    await chosen.close();
  }
  process.stdout.write(`${JSON.stringify({ backend, threads, tokensPerSec, defaultBackend })}\n`);
  process.exit(0);
}
