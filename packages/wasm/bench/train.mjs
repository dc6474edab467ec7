#!/usr/bin/env node
// LoRA training speed and memory of backend "wasm" on CPU, side by side with
// PyTorch + PEFT (scripts/reference/peft_train_bench.py) when `python3 -c
// "import torch, peft"` works, at the same thread count. Not a test.
//
//   npm run bench:train -- [--shapes smollm2,qwen25] [--bases f32,q8_0] [--adapters qv8,all16]
//                          [--threads 2] [--steps 3] [--seq 256] [--batch 4] [--layers N]
//                          [--checkpointing auto|on|off] [--no-torch]
//
// The default is the whole matrix: both shapes, both bases, both adapters
// (qv8: rank 8 on q_proj,v_proj; all16: rank 16 on every linear). The models
// are random-weight Hugging Face folders in the real shapes (hidden size,
// layers, heads, FFN, vocabulary rows), written once to .cache/bench-train;
// both engines load the same folder in float32, and the q8_0 base is ours
// quantized at load (PyTorch trains over float32 in both rows, as the issue
// asks). Each run is a fresh process: tokens/s is that of the median of
// --steps timed steps (after one untimed step), peak memory the process's
// peak RSS (ru_maxrss: wasm memory, JS heap and everything else for ours;
// the same measure for Python), load included. --layers cuts the blocks for
// a quick run (the figures then describe that smaller model); --checkpointing
// on/off sets trainStep's gradientCheckpointing, auto leaves it to the engine.
// Build first (`npm run build`).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { parseArgs } from "node:util";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const SHAPES = {
  smollm2: { architecture: "llama", hiddenSize: 576, numLayers: 30, numHeads: 9, numKVHeads: 3, ffnSize: 1536, ropeTheta: 100000, tiedEmbeddings: true, vocabSize: 49152 },
  qwen25: { architecture: "qwen2", hiddenSize: 896, numLayers: 24, numHeads: 14, numKVHeads: 2, ffnSize: 4864, ropeTheta: 1000000, tiedEmbeddings: true, vocabSize: 151936 },
};
const ADAPTERS = {
  qv8: { rank: 8, targets: "q_proj,v_proj" },
  all16: { rank: 16, targets: "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj" },
};
const BASES = ["f32", "q8_0"];

const { values } = parseArgs({
  options: {
    shapes: { type: "string", default: Object.keys(SHAPES).join(",") },
    bases: { type: "string", default: BASES.join(",") },
    adapters: { type: "string", default: Object.keys(ADAPTERS).join(",") },
    threads: { type: "string", default: "2" },
    steps: { type: "string", default: "3" },
    seq: { type: "string", default: "256" },
    batch: { type: "string", default: "4" },
    layers: { type: "string" },
    checkpointing: { type: "string", default: "auto" },
    "no-torch": { type: "boolean", default: false },
    // Child process only: the folder, base and adapter of one measurement.
    worker: { type: "string" },
    base: { type: "string" },
    adapter: { type: "string" },
  },
});
const common = { threads: Number(values.threads), steps: Number(values.steps), seq: Number(values.seq), batch: Number(values.batch) };

/** Child process: load, applyLoRA, time trainStep; one JSON line out. */
async function measureWasm(folder, base, adapter) {
  const { loadTrainable, Rng } = await import("@infer/core");
  await import("@infer/wasm");
  const model = await loadTrainable(folder, { backend: "wasm", threads: common.threads, ...(base === "f32" ? {} : { quantize: base }) });
  const loadRssBytes = process.resourceUsage().maxRSS * 1024;
  model.applyLoRA({ rank: adapter.rank, alpha: 2 * adapter.rank, targetModules: adapter.targets.split(",") });
  const rng = new Rng(0);
  const { vocab_size: vocab } = JSON.parse(await readFile(join(folder, "config.json"), "utf8"));
  const inputIds = Array.from({ length: common.batch }, () => Array.from({ length: common.seq }, () => 3 + (rng.nextUint32() % (vocab - 3))));
  const checkpointing = { on: { gradientCheckpointing: true }, off: { gradientCheckpointing: false }, auto: {} }[values.checkpointing];
  const times = [];
  let last;
  for (let step = 0; step <= common.steps; step++) {
    const start = performance.now();
    last = await model.trainStep({ inputIds }, { learningRate: 1e-4, ...checkpointing });
    if (step > 0) times.push((performance.now() - start) / 1000);
  }
  await model.close();
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const peakRssBytes = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(`${JSON.stringify({ tokensPerSecond: last.tokens / median, peakRssBytes, loadRssBytes, loss: last.loss })}\n`);
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

/** The names in a comma list, each checked against the allowed ones. */
function pick(list, allowed, option) {
  const names = list.split(",").filter(Boolean);
  for (const name of names) if (!allowed.includes(name)) throw new Error(`--${option}: ${name} is not one of ${allowed.join(", ")}`);
  return names;
}

async function main() {
  const { writeRandomHf } = await import("@infer/wasm/testing");
  const shapes = pick(values.shapes, Object.keys(SHAPES), "shapes");
  const bases = pick(values.bases, BASES, "bases");
  const adapters = pick(values.adapters, Object.keys(ADAPTERS), "adapters");
  if (!["auto", "on", "off"].includes(values.checkpointing)) throw new Error("--checkpointing is auto, on or off");
  const torch = !values["no-torch"] && (await pythonHasPeft());
  if (!values["no-torch"] && !torch) console.log("(python3 with torch and peft not found: the PyTorch columns stay empty)");
  const shared = ["--threads", values.threads, "--steps", values.steps, "--seq", values.seq, "--batch", values.batch];
  console.log(`seq ${common.seq}, batch ${common.batch}, ${common.threads} threads, ${common.steps} timed steps, checkpointing ${values.checkpointing}`);
  const rows = [];
  for (const shapeName of shapes) {
    const spec = { seed: 1, contextLength: Math.max(512, common.seq), ...SHAPES[shapeName], ...(values.layers ? { numLayers: Number(values.layers) } : {}) };
    const folder = join(root, ".cache", "bench-train", `${shapeName}-${spec.numLayers}l-v${spec.vocabSize}`);
    if (!existsSync(join(folder, "model.safetensors"))) await writeRandomHf(folder, spec);
    for (const adapterName of adapters) {
      const { rank, targets } = ADAPTERS[adapterName];
      const reference = torch
        ? JSON.parse(await run("python3", [join(root, "scripts", "reference", "peft_train_bench.py"), "--model", folder, "--rank", String(rank), "--alpha", String(2 * rank), "--targets", targets, ...shared]))
        : undefined;
      for (const base of bases) {
        const ours = JSON.parse(await run(process.execPath, [fileURLToPath(import.meta.url), "--worker", folder, "--base", base, "--adapter", adapterName, "--checkpointing", values.checkpointing, ...shared]));
        const row = { shape: `${shapeName} (${spec.numLayers} layers)`, base, adapter: adapterName, ours, reference };
        rows.push(row);
        printRow(row, rows.length === 1);
      }
    }
  }
}

const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const COLUMNS = [
  ["shape", 20],
  ["base", 5],
  ["adapter", 7],
  ["ours tok/s", 10],
  ["torch tok/s", 11],
  ["ratio", 6],
  ["ours peak", 10],
  ["(after load)", 12],
  ["torch peak", 10],
  ["ratio", 6],
];

/** One table line per measurement, printed as soon as it is known (a full run is long). */
function printRow({ shape, base, adapter, ours, reference }, header) {
  const line = (cells) => console.log(cells.map((cell, i) => String(cell).padStart(COLUMNS[i][1])).join("  "));
  if (header) line(COLUMNS.map(([name]) => name));
  line([
    shape,
    base,
    adapter,
    ours.tokensPerSecond.toFixed(1),
    reference ? reference.tokensPerSecond.toFixed(1) : "-",
    reference ? `${(ours.tokensPerSecond / reference.tokensPerSecond).toFixed(2)}x` : "-",
    mib(ours.peakRssBytes),
    mib(ours.loadRssBytes),
    reference ? mib(reference.peakRssBytes) : "-",
    reference ? `${(ours.peakRssBytes / reference.peakRssBytes).toFixed(2)}x` : "-",
  ]);
}

if (values.worker) {
  await measureWasm(values.worker, values.base, ADAPTERS[values.adapter]);
} else {
  await main();
}
