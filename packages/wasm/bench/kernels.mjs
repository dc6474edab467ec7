#!/usr/bin/env node
// Micro-benchmark (not a test): weight bytes streamed per second by matmul,
// reference TypeScript kernel vs WebAssembly SIMD kernels at 1 and 2 threads,
// for Q8_0 / Q4_0 matrices of a small model's shapes. Build first
// (`npm run build`), then: node packages/wasm/bench/kernels.mjs [--batch N] [--seconds S]
import { performance } from "node:perf_hooks";
import { GgmlType, quantize } from "@infer/formats";
import { referenceMatmul } from "../dist/src/kernels/reference.js";
import { createWasmKernels } from "../dist/src/kernels/wasm/index.js";

const argument = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
};
const batch = argument("--batch", 1);
const seconds = argument("--seconds", 0.3);

const SHAPES = [
  [576, 1536],
  [1536, 576],
];
const TYPES = [GgmlType.Q8_0, GgmlType.Q4_0];

function matrix(type, rows, cols) {
  const values = new Float32Array(rows * cols);
  for (let i = 0; i < values.length; i++) values[i] = Math.sin(i * 12.9898) * 0.5;
  return { type, rows, cols, data: quantize(type, values) };
}

/**
 * Calls per second of `run`: the best of ten windows over about `seconds` in
 * all, after a warm-up. The best window, not the mean, because other processes
 * sharing the cores only ever slow a window down.
 */
function rate(run) {
  for (let i = 0; i < 3; i++) run();
  let best = 0;
  for (let window = 0; window < 10; window++) {
    let calls = 0;
    const start = performance.now();
    let elapsed = 0;
    while (elapsed < seconds * 100) {
      run();
      calls++;
      elapsed = performance.now() - start;
    }
    best = Math.max(best, (calls * 1000) / elapsed);
  }
  return best;
}

const kernels = {
  reference: { name: "reference", matmul: referenceMatmul },
  "wasm x1": await createWasmKernels({ threads: 1 }),
  "wasm x2": await createWasmKernels({ threads: 2 }),
};

console.log(`batch ${batch}; GB/s of weight bytes read (calls/s in brackets)`);
console.log(["matrix".padEnd(18), ...Object.keys(kernels).map((name) => name.padStart(20))].join(""));
for (const type of TYPES) {
  for (const [rows, cols] of SHAPES) {
    const w = matrix(type, rows, cols);
    const x = new Float32Array(batch * cols).map((_, i) => Math.cos(i));
    const out = new Float32Array(batch * rows);
    const cells = [];
    for (const k of Object.values(kernels)) {
      const perSecond = rate(() => k.matmul(out, w, x, batch));
      cells.push(`${((perSecond * w.data.byteLength) / 1e9).toFixed(2)} (${perSecond.toFixed(0)})`.padStart(20));
    }
    console.log([`${GgmlType[type]} ${rows}x${cols}`.padEnd(18), ...cells].join(""));
  }
}
for (const k of Object.values(kernels)) await k.dispose?.();
