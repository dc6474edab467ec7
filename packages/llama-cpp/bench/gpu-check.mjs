#!/usr/bin/env node
// The llama_cpp backend's CUDA path, checked on a machine with an NVIDIA GPU (not a test: CI has no GPU).
// Needs the CUDA binary packages beside node-llama-cpp (docs/llama-cpp.md, "With an NVIDIA GPU") and a build.
//
//   node packages/llama-cpp/bench/gpu-check.mjs [--models DIR] [--shapes smollm2,qwen2.5-0.5b] [--tokens N]
//
// 1. stories260K (../shared/models, or DIR/stories260K) with every layer on the GPU: the runtime must be
//    "cuda", all layers offloaded, and greedy 200 tokens from BOS equal llama2.c's published text.
// 2. Random-weight bench models (packages/wasm/bench/bench-models.mjs, Q8_0) in each shape: prefill of a
//    long prompt and greedy decode (EOS ignored) on the GPU, then the same in a child process with the GPU
//    turned off (INFER_LLAMA_CPP_GPU=false), printing both rates, their ratio and how many of the greedy
//    tokens agree. Exits 1 when a check of part 1 fails.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 && at + 1 < args.length ? args[at + 1] : fallback;
};
const modelsDir = option("--models", join(root, "..", "shared", "models"));
const shapes = option("--shapes", "smollm2").split(",").filter(Boolean);
const tokens = Number(option("--tokens", "128"));
const PROMPT_WORDS = 90; // about 500 tokens in the bench models' synthetic vocabulary

async function measure(path, gpu) {
  const { loadModel } = await import("@infer/core");
  await import("@infer/llama-cpp");
  const started = performance.now();
  const model = await loadModel(path, { backend: "llama_cpp", gpuLayers: gpu ? -1 : 0, contextLength: 2048, parallelSlots: 1 });
  const loadMs = performance.now() - started;
  const prompt = Array.from({ length: PROMPT_WORDS }, (_, i) => `word${i % 97}`).join(" ");
  // Warm-up (CUDA kernels compile or load on first use) on another prompt, so that the timed call's
  // prompt is not reused from the cache, then the timed call.
  await model.generateText(`warm ${prompt}`, { temperature: 0, ignoreEos: true, maxTokens: 8 });
  const result = await model.generateText(prompt, { temperature: 0, ignoreEos: true, maxTokens: tokens });
  const line = {
    runtime: model.gpu,
    gpuLayers: model.gpuLayers,
    threads: model.threads,
    loadMs: Math.round(loadMs),
    promptTokens: result.metrics.promptTokens,
    prefillTokensPerSec: Math.round(result.metrics.prefillTokensPerSec ?? (result.metrics.promptTokens * 1000) / result.metrics.prefillMs),
    decodeTokensPerSec: Math.round(result.metrics.decodeTokensPerSec),
    ids: result.tokens.map((t) => t.id),
  };
  await model.close();
  return line;
}

if (args[0] === "--child") {
  // One measurement in this process: the GPU choice is made once per process by the runtime.
  console.log(JSON.stringify(await measure(args[1], args[2] === "gpu")));
  process.exit(0);
}

let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed = true;
};

const stories = join(modelsDir, "stories260K", "stories260K.gguf");
if (existsSync(stories)) {
  const { loadModel } = await import("@infer/core");
  await import("@infer/llama-cpp");
  const started = performance.now();
  const model = await loadModel(stories, { backend: "llama_cpp", gpuLayers: -1 });
  console.log(`stories260K loaded in ${Math.round(performance.now() - started)} ms`);
  check(model.gpu === "cuda", `runtime is cuda (got ${model.gpu})`);
  check(model.gpuLayers >= 5, `every layer on the GPU (gpuLayers ${model.gpuLayers})`);
  const expected = readFileSync(join(modelsDir, "stories260K", "expected-greedy-200.txt"), "utf8").replace(/\n$/, "");
  const result = await model.generateText("", { temperature: 0, maxTokens: 200 });
  check(result.text === expected, "greedy 200 tokens from BOS equal llama2.c's published text");
  if (result.text !== expected) console.log(JSON.stringify(result.text.slice(0, 200)));
  console.log(`stories260K decode ${Math.round(result.metrics.decodeTokensPerSec)} tokens/s on the GPU`);
  await model.close();
} else {
  check(false, `${stories} not found (--models DIR)`);
}

const { benchModel } = await import(join(root, "packages", "wasm", "bench", "bench-models.mjs"));
for (const shape of shapes) {
  const path = await benchModel(join(root, ".cache", "bench-models"), shape, "q8_0");
  const child = (gpu) => {
    const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", path, gpu ? "gpu" : "cpu", "--tokens", String(tokens)], {
      encoding: "utf8",
      env: { ...process.env, INFER_LLAMA_CPP_GPU: gpu ? "" : "false" },
      timeout: 240_000,
    });
    const last = run.stdout.trim().split("\n").pop() ?? "";
    if (run.status !== 0 || !last.startsWith("{")) throw new Error(`${shape} ${gpu ? "gpu" : "cpu"}: exit ${run.status ?? run.signal}\n${run.stderr.slice(-2000)}`);
    return JSON.parse(last);
  };
  const gpu = child(true);
  const cpu = child(false);
  const agree = gpu.ids.findIndex((id, i) => id !== cpu.ids[i]);
  for (const [name, m] of [["gpu", gpu], ["cpu", cpu]]) {
    console.log(
      `${shape} Q8_0 ${name}: runtime ${m.runtime}, gpuLayers ${m.gpuLayers}, threads ${m.threads}, load ${m.loadMs} ms, ` +
        `prefill ${m.promptTokens} tokens at ${m.prefillTokensPerSec} tokens/s, decode ${m.decodeTokensPerSec} tokens/s`,
    );
  }
  check(gpu.runtime === "cuda" && cpu.runtime === false, `${shape}: GPU run on cuda, CPU run without a GPU`);
  console.log(
    `${shape} Q8_0 gpu/cpu: prefill ${(gpu.prefillTokensPerSec / cpu.prefillTokensPerSec).toFixed(1)}x, ` +
      `decode ${(gpu.decodeTokensPerSec / cpu.decodeTokensPerSec).toFixed(1)}x; greedy tokens agree ` +
      `${agree < 0 ? `all ${gpu.ids.length}` : `for the first ${agree} of ${gpu.ids.length}`}`,
  );
}
process.exit(failed ? 1 : 0);
