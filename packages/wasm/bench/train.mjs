#!/usr/bin/env node
// LoRA training speed and memory of backend "wasm" on CPU, side by side with
// PyTorch + PEFT (scripts/reference/peft_train_bench.py) when `python3 -c
// "import torch, peft"` works, at the same thread count. Not a test.
//
//   npm run bench:train -- [--threads 2] [--steps 3] [--seq 256] [--batch 4] [--rank 8]
//                          [--targets q_proj,v_proj] [--layers N] [--shape smollm2|qwen25]
//
// The models are random-weight Hugging Face folders in real shapes (hidden size,
// layers, heads, FFN), written once to .cache/bench-train; both engines load the
// same folder in float32. Their vocabulary is the test byte vocabulary (a few
// hundred tokens), so the LM head's share of the work is smaller than in the real
// models: the figures compare the transformer blocks' training. Each engine runs
// in a fresh process: tokens/s is that of the median of --steps timed steps
// (after one untimed step), peak memory the process's peak RSS.
// Build first (`npm run build`).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { parseArgs } from "node:util";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const SHAPES = {
  smollm2: { hiddenSize: 576, numLayers: 30, numHeads: 9, numKVHeads: 3, ffnSize: 1536, ropeTheta: 100000, tiedEmbeddings: true },
  qwen25: { architecture: "qwen2", hiddenSize: 896, numLayers: 24, numHeads: 14, numKVHeads: 2, ffnSize: 4864, ropeTheta: 1000000, tiedEmbeddings: true },
};

const { values } = parseArgs({
  options: {
    threads: { type: "string", default: "2" },
    steps: { type: "string", default: "3" },
    seq: { type: "string", default: "256" },
    batch: { type: "string", default: "4" },
    rank: { type: "string", default: "8" },
    targets: { type: "string", default: "q_proj,v_proj" },
    shape: { type: "string", default: "smollm2" },
    layers: { type: "string" },
    worker: { type: "string" },
  },
});
const settings = {
  threads: Number(values.threads),
  steps: Number(values.steps),
  seq: Number(values.seq),
  batch: Number(values.batch),
  rank: Number(values.rank),
  targets: values.targets,
};

if (values.worker) {
  await measureWasm(values.worker);
} else {
  await main();
}

/** Child process: load, applyLoRA, time trainStep; one JSON line out. */
async function measureWasm(folder) {
  const { loadTrainable, Rng } = await import("@infer/core");
  await import("@infer/wasm");
  const model = await loadTrainable(folder, { backend: "wasm", threads: settings.threads });
  model.applyLoRA({ rank: settings.rank, alpha: 2 * settings.rank, targetModules: settings.targets.split(",") });
  const rng = new Rng(0);
  const { vocab_size: vocab } = JSON.parse(await readFile(join(folder, "config.json"), "utf8"));
  const inputIds = Array.from({ length: settings.batch }, () => Array.from({ length: settings.seq }, () => 3 + (rng.nextUint32() % (vocab - 3))));
  const times = [];
  let last;
  for (let step = 0; step <= settings.steps; step++) {
    const start = performance.now();
    last = await model.trainStep({ inputIds }, { learningRate: 1e-4 });
    if (step > 0) times.push((performance.now() - start) / 1000);
  }
  await model.close();
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const peakRssBytes = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(`${JSON.stringify({ tokensPerSecond: last.tokens / median, peakRssBytes, loss: last.loss })}\n`);
}

function run(command, args) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, HF_HUB_DISABLE_PROGRESS_BARS: "1", TRANSFORMERS_VERBOSITY: "error" };
    const child = spawn(command, args, { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(" ")} exited ${code}`))));
  });
}

async function pythonHasPeft() {
  return run("python3", ["-c", "import torch, peft"]).then(() => true, () => false);
}

async function main() {
  const { writeRandomHf } = await import("@infer/wasm/testing");
  const shape = SHAPES[values.shape];
  if (!shape) throw new Error(`--shape must be one of ${Object.keys(SHAPES).join(", ")}`);
  const spec = { architecture: "llama", seed: 1, contextLength: Math.max(512, settings.seq), ...shape, ...(values.layers ? { numLayers: Number(values.layers) } : {}) };
  const folder = join(root, ".cache", "bench-train", `${values.shape}-${spec.numLayers}l`);
  if (!existsSync(join(folder, "model.safetensors"))) await writeRandomHf(folder, spec);
  const flags = ["--threads", values.threads, "--steps", values.steps, "--seq", values.seq, "--batch", values.batch, "--rank", values.rank, "--targets", values.targets];
  console.log(`${values.shape} shape (${spec.numLayers} layers, byte vocabulary), seq ${settings.seq}, batch ${settings.batch}, rank ${settings.rank} ${settings.targets}, ${settings.threads} threads, F32`);
  const rows = [];
  const wasm = JSON.parse(await run(process.execPath, [fileURLToPath(import.meta.url), "--worker", folder, ...flags]));
  rows.push(["wasm", wasm]);
  if (await pythonHasPeft()) {
    const script = join(root, "scripts", "reference", "peft_train_bench.py");
    const torch = JSON.parse(await run("python3", [script, "--model", folder, ...flags]));
    rows.push(["pytorch+peft", torch]);
  } else {
    console.log("(python3 with torch and peft not found: the PyTorch column is skipped)");
  }
  const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
  for (const [name, r] of rows) console.log(`${name.padEnd(14)} ${r.tokensPerSecond.toFixed(1).padStart(9)} tokens/s   peak RSS ${mib(r.peakRssBytes).padStart(9)}`);
  if (rows.length === 2) {
    const [, torch] = rows[1];
    console.log(`wasm / pytorch: tokens/s ${(wasm.tokensPerSecond / torch.tokensPerSecond).toFixed(2)}x, peak memory ${(wasm.peakRssBytes / torch.peakRssBytes).toFixed(2)}x`);
  }
}
