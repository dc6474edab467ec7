#!/usr/bin/env node
// Interleaved A/B of two builds of kernels.wasm on one matmul (not a test):
//   node packages/wasm/bench/ab.mjs <a.wasm> <b.wasm> [--type Q4_0] [--shape 1536x576]
//        [--batch 1] [--copies 1] [--rounds 40] [--interleave]
// Each module runs on a shared memory of its own, on the calling thread only, taking
// turns in 20 ms windows; it prints each build's best rate, the ratio of the
// best rates and the median of the per-round ratios (the figure to quote: a
// busy spell of the machine slows both sides of a round alike), and the
// largest difference between the two outputs. --copies N cycles through N
// copies of the matrix, so that with N x its size beyond the L3 cache the
// weights stream from memory as in a real decode step; --interleave runs Q4_0 / Q8_0 / Q5_0 / Q5_1
// in the layout the engine gives them at load (each build interleaving its own
// copies). To compare relaxed-SIMD
// builds on Node 20, run node with --experimental-wasm-relaxed-simd.
// Build first (`npm run build`); the builds to compare are dist/src/kernels/wasm/*.wasm
// or copies of them made from other versions of assembly/.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { GgmlType, quantize } from "@infer/formats";
import { KernelLayout } from "../dist/src/kernels/types.js";

const [fileA, fileB] = process.argv.slice(2);
const option = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
};
if (!fileA?.endsWith(".wasm") || !fileB?.endsWith(".wasm")) {
  console.error("usage: ab.mjs <a.wasm> <b.wasm> [--type Q4_0] [--shape 1536x576] [--batch 1] [--copies 1] [--rounds 40] [--interleave]");
  process.exit(2);
}
const typeName = option("--type", "Q8_0");
const type = GgmlType[typeName];
const [rows, cols] = option("--shape", "1536x576").split("x").map(Number);
const blockSize = { Q4_K: 256, Q5_K: 256, Q6_K: 256 }[typeName] ?? 32;
if (cols % blockSize !== 0) {
  // A row must hold whole blocks (the kernels would read cols / blockSize of them, no more).
  console.error(`--shape: ${typeName} rows need a multiple of ${blockSize} columns, got ${cols}`);
  process.exit(2);
}
const batch = Number(option("--batch", "1"));
const copies = Number(option("--copies", "1"));
const rounds = Number(option("--rounds", "40"));

/**
 * One build on a memory of its own (two builds' static data, each written at instantiation,
 * may overlap: on one shared memory the second would overwrite the first's constants), with
 * its own copies of the weights, the activations and the buffers.
 */
function setUp(file, weights) {
  const memory = new WebAssembly.Memory({ initial: 1024, maximum: 65536, shared: true });
  const exports = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(file)), { env: { memory } }).exports;
  let top = exports.heapBase();
  const allocate = (bytes) => {
    const at = Math.ceil(top / 64) * 64;
    top = at + bytes;
    const needed = Math.ceil(top / 65536) - memory.buffer.byteLength / 65536;
    if (needed > 0) memory.grow(needed);
    return at;
  };
  const matrices = [];
  for (let c = 0; c < copies; c++) {
    const at = allocate(weights.byteLength);
    new Uint8Array(memory.buffer, at, weights.byteLength).set(weights);
    // --interleave: rewritten by the build's own interleave() (Q4_0, Q8_0, Q5_0, Q5_1).
    if (interleaved) exports.interleave(type, at, rows, cols, allocate(4 * exports.rowBytes(type, cols)));
    matrices.push(at);
  }
  const x = allocate(batch * cols * 4);
  new Float32Array(memory.buffer, x, batch * cols).set(new Float32Array(batch * cols).map((_, i) => Math.cos(i)));
  const blocks = (batch * cols) / 32;
  const [xq, xd] = [allocate(exports.activationQuantBytes(batch, cols)), allocate(exports.activationScaleBytes(batch, cols))];
  const [xs, xb] = [allocate(blocks * 4), allocate(blocks * 4)];
  exports.quantizeActivations(x, batch, cols, xq, xd, xs, xb);
  const out = allocate(batch * rows * 4);
  const scratch = allocate(exports.decodeScratchBytes(cols) + 64);
  let turn = 0;
  return {
    run() {
      turn = (turn + 1) % copies;
      exports.matmul(matmulType, out, matrices[turn], rows, cols, x, xq, xd, xs, xb, batch, scratch, 0, rows);
    },
    output: () => new Float32Array(memory.buffer, out, batch * rows),
  };
}

const interleaved = process.argv.includes("--interleave");
const matmulType = interleaved ? { [GgmlType.Q4_0]: KernelLayout.Q4_0_X4, [GgmlType.Q8_0]: KernelLayout.Q8_0_X4, [GgmlType.Q5_0]: KernelLayout.Q5_0_X4, [GgmlType.Q5_1]: KernelLayout.Q5_1_X4 }[type] : type;
const values = new Float32Array(rows * cols).map((_, i) => Math.sin(i * 12.9898) * 0.5);
const weights = quantize(type, values);
const builds = [setUp(fileA, weights), setUp(fileB, weights)];
const run = (k) => builds[k].run();
run(0);
run(1);
const a = builds[0].output();
const b = builds[1].output();
let maxDifference = 0;
for (let i = 0; i < a.length; i++) maxDifference = Math.max(maxDifference, Math.abs(a[i] - b[i]));

const best = [0, 0];
const ratios = [];
for (let round = 0; round < rounds; round++) {
  const rate = [0, 0];
  for (const k of round % 2 ? [1, 0] : [0, 1]) {
    let calls = 0;
    const start = performance.now();
    let elapsed = 0;
    while (elapsed < 20) {
      run(k);
      calls++;
      elapsed = performance.now() - start;
    }
    rate[k] = (calls * 1000) / elapsed;
    best[k] = Math.max(best[k], rate[k]);
  }
  ratios.push(rate[1] / rate[0]);
}
ratios.sort((p, q) => p - q);
const gbPerSecond = (callsPerSecond) => ((callsPerSecond * weights.byteLength) / 1e9).toFixed(2);
console.log(
  `${typeName} ${rows}x${cols} batch ${batch}, ${copies} cop${copies > 1 ? "ies" : "y"}: A ${gbPerSecond(best[0])} GB/s, B ${gbPerSecond(best[1])} GB/s ` +
    `(weight bytes); best B/A ${(best[1] / best[0]).toFixed(3)}, median paired B/A ${ratios[Math.floor(ratios.length / 2)].toFixed(3)}; ` +
    `largest output difference ${maxDifference.toExponential(2)}`,
);
