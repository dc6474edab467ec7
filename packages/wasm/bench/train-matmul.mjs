#!/usr/bin/env node
// Micro-benchmark (not a test): GFLOP/s of the F32 matrix products of a LoRA training step
// (docs/performance.md, "LoRA training") over a batch of token rows, on SmolLM2-135M's shapes:
//   forward   kernels.matmul over a frozen F32 base W [rows, cols] (shared with prefill)
//   backward  frozenLinearBackward: dx [n, cols] += dy [n, rows] · W
//   lora      one rank-r adapter's forward and backward (denseForward / denseBackward)
// at 1 and 2 threads (and the relaxed-SIMD build with --relaxed, which on Node 20 turns on
// V8's --experimental-wasm-relaxed-simd first). Each cell is the median of --runs calls: wall
// time and, at 1 thread, the process's CPU time (less disturbed by other processes on shared cores).
// Build first (`npm run build`), then:
//   node packages/wasm/bench/train-matmul.mjs [--tokens 1024] [--runs 7] [--threads 1,2] [--relaxed] [--only forward,backward,lora]
import { performance } from "node:perf_hooks";
import v8 from "node:v8";
import { GgmlType } from "@infer/formats";
import { createWasmKernels } from "../dist/src/kernels/wasm/index.js";
import { denseBackward, denseForward, frozenLinearBackward } from "../dist/src/train/ops/linear.js";

const option = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
};
const tokens = Number(option("--tokens", 1024));
const runs = Number(option("--runs", 7));
const threadCounts = option("--threads", "1,2").split(",").map(Number);
const only = new Set(option("--only", "forward,backward,lora").split(","));
const relaxed = process.argv.includes("--relaxed");
if (relaxed) v8.setFlagsFromString("--experimental-wasm-relaxed-simd");

/** [rows, cols] of the base matrices: attention q/o, k/v, MLP gate/up, down, and the LM head. */
const SHAPES = [
  [576, 576],
  [192, 576],
  [1536, 576],
  [576, 1536],
  [49152, 576],
];
const RANK = 8;

function filled(length, seed) {
  const values = new Float32Array(length);
  for (let i = 0; i < length; i++) values[i] = Math.sin(i * 12.9898 + seed) * 0.5;
  return values;
}

/** Median seconds (wall and CPU) of `run` over `runs` calls, after one untimed call. */
function measure(run) {
  run();
  const walls = [];
  const cpus = [];
  for (let i = 0; i < runs; i++) {
    const cpu = process.cpuUsage();
    const start = performance.now();
    run();
    walls.push((performance.now() - start) / 1e3);
    const used = process.cpuUsage(cpu);
    cpus.push((used.user + used.system) / 1e6);
  }
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  return { wall: median(walls), cpu: median(cpus) };
}

const cell = (flops, { wall, cpu }, threads) =>
  `${(flops / wall / 1e9).toFixed(1).padStart(6)}${threads === 1 ? ` (cpu ${(flops / cpu / 1e9).toFixed(1)})` : ""}`.padEnd(20);

console.log(`${tokens} tokens; GFLOP/s (median of ${runs}, wall; at 1 thread also per CPU second)`);
for (const threads of threadCounts) {
  const kernels = await createWasmKernels({ threads, relaxedSimd: relaxed });
  console.log(`\n${kernels.name}`);
  console.log(`${"W [rows, cols]".padEnd(16)}${["forward", "backward", "lora fwd+bwd"].map((s) => s.padEnd(20)).join("")}`);
  for (const [rows, cols] of SHAPES) {
    const w = { type: GgmlType.F32, rows, cols, data: new Uint8Array(filled(rows * cols, 1).buffer) };
    const x = filled(tokens * cols, 2);
    const dy = filled(tokens * rows, 3);
    const out = new Float32Array(tokens * rows);
    const dx = new Float32Array(tokens * cols);
    const flops = 2 * tokens * rows * cols;
    const cells = [];
    cells.push(only.has("forward") ? cell(flops, measure(() => kernels.matmul(out, w, x, tokens)), threads) : "-".padEnd(20));
    cells.push(only.has("backward") ? cell(flops, measure(() => frozenLinearBackward(dx, w, dy, tokens, kernels)), threads) : "-".padEnd(20));
    if (only.has("lora") && rows <= 1536) {
      // An adapter on this linear: u = x · Aᵀ, y = u · Bᵀ; backward: dB, du, dA, dx.
      const a = filled(RANK * cols, 4);
      const b = filled(rows * RANK, 5);
      const u = new Float32Array(tokens * RANK);
      const gradA = new Float32Array(a.length);
      const gradB = new Float32Array(b.length);
      const du = new Float32Array(tokens * RANK);
      const loraFlops = 2 * tokens * RANK * (cols + rows) * 3; // three products per matrix: forward, weight gradient, input gradient
      cells.push(
        cell(
          loraFlops,
          measure(() => {
            denseForward(u, a, RANK, cols, x, tokens, kernels);
            denseForward(out, b, rows, RANK, u, tokens, kernels);
            denseBackward(gradB, du, b, rows, RANK, u, dy, tokens, kernels);
            denseBackward(gradA, dx, a, RANK, cols, x, du, tokens, kernels);
          }),
          threads,
        ),
      );
    }
    console.log(`${`${rows}x${cols}`.padEnd(16)}${cells.join("")}`);
  }
  await kernels.dispose();
}
