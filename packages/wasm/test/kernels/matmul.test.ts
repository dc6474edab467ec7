// The WebAssembly SIMD kernels against the plain TypeScript reference kernel:
// every weight type, odd row counts, batch 1, 3, 7 and 12, 1 to 4 threads, with
// the per-output error bounds of helpers.ts (float32 arithmetic; plus, for
// quantized weights, int8 activation quantization). Where the runtime has
// relaxed SIMD, its build of the kernels runs every case too (relaxed-simd.test.ts
// runs this file again with the V8 flag on runtimes that need one).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { f16ToF32, GgmlType } from "@infer/formats";
import { referenceMatmul } from "../../src/kernels/reference.js";
import { KernelLayout, plainTypeOf, type Kernels, type WeightMatrix } from "../../src/kernels/types.js";
import { createWasmKernels, relaxedSimdSupported } from "../../src/kernels/wasm/index.js";
import {
  assertWithin,
  errorBounds,
  exactlyQuantizableActivations,
  random,
  randomActivations,
  randomMatrix,
} from "./helpers.js";

interface Case {
  type: GgmlType;
  /** Column counts to try: multiples of the block size (any count for float types). */
  cols: number[];
  quantizedActivations: boolean;
}

const CASES: Case[] = [
  { type: GgmlType.Q8_0, cols: [32, 96], quantizedActivations: true },
  { type: GgmlType.Q4_0, cols: [32, 160], quantizedActivations: true },
  { type: GgmlType.Q4_1, cols: [32, 96], quantizedActivations: true },
  { type: GgmlType.Q5_0, cols: [32, 160], quantizedActivations: true },
  { type: GgmlType.Q5_1, cols: [64, 96], quantizedActivations: true },
  { type: GgmlType.Q4_K, cols: [256, 512], quantizedActivations: true },
  { type: GgmlType.Q5_K, cols: [256, 512], quantizedActivations: true },
  { type: GgmlType.Q6_K, cols: [256, 512], quantizedActivations: true },
  { type: GgmlType.F32, cols: [37, 64], quantizedActivations: false },
  { type: GgmlType.F16, cols: [5, 72], quantizedActivations: false },
  { type: GgmlType.BF16, cols: [13, 64], quantizedActivations: false },
];
const ROWS = [1, 5, 13];
/** createWasmKernels' relaxedSimd: the baseline build, and the relaxed one where it runs. */
const BUILDS = relaxedSimdSupported() ? [false, true] : [false];
const BATCHES = [1, 3, 7, 12];

function reference(w: WeightMatrix, x: Float32Array, batch: number): Float32Array {
  const out = new Float32Array(batch * w.rows);
  referenceMatmul(out, w, x, batch);
  return out;
}

for (const relaxedSimd of BUILDS) {
  for (const threads of [1, 2, 3, 4]) {
    describe(`wasm matmul${relaxedSimd ? " (relaxed SIMD)" : ""}, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
      let kernels: Kernels;
      // minBytesPerThread 0: every call uses every thread, however small.
      before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0, relaxedSimd })));
      after(() => kernels.dispose?.());

      for (const { type, cols: colCounts, quantizedActivations } of CASES) {
        it(`${GgmlType[type]}: matches the reference within its error bound`, () => {
          const next = random(1000 * threads + type);
          for (const cols of colCounts) {
            for (const rows of ROWS) {
              const w = randomMatrix(type, rows, cols, next);
              for (const batch of BATCHES) {
                const shape = `${GgmlType[type]} [${rows}, ${cols}] batch ${batch}`;
                // Activations the int8 quantization keeps exactly: only arithmetic error remains.
                if (quantizedActivations) {
                  const exact = exactlyQuantizableActivations(batch * cols, next);
                  const out = new Float32Array(batch * rows);
                  kernels.matmul(out, w, exact, batch);
                  assertWithin(out, reference(w, exact, batch), errorBounds(w, exact, batch, false), `${shape}, exact activations`);
                }
                const x = randomActivations(batch * cols, next);
                const out = new Float32Array(batch * rows).fill(NaN);
                kernels.matmul(out, w, x, batch);
                assertWithin(out, reference(w, x, batch), errorBounds(w, x, batch, quantizedActivations), shape);
                // The kernels' own layout of the matrix (Q4_0 rows interleaved by four), same bound.
                const prepared = kernels.prepareMatrix!(w);
                if (prepared !== w) {
                  const preparedOut = new Float32Array(batch * rows).fill(NaN);
                  kernels.matmul(preparedOut, prepared, x, batch);
                  const label = `${shape}, ${GgmlType[prepared.type]}`;
                  assertWithin(preparedOut, reference(w, x, batch), errorBounds(w, x, batch, quantizedActivations), label);
                }
              }
            }
          }
        });
      }
    });
  }
}

describe("wasm matmul: default thread split on a larger matrix", () => {
  it("Q8_0 [192, 512] with default options", async () => {
    const kernels = await createWasmKernels();
    try {
      const next = random(77);
      const w = randomMatrix(GgmlType.Q8_0, 192, 512, next);
      for (const batch of [1, 4]) {
        const x = randomActivations(batch * 512, next);
        const out = new Float32Array(batch * 192);
        kernels.matmul(out, w, x, batch);
        assertWithin(out, reference(w, x, batch), errorBounds(w, x, batch, true), `batch ${batch}`);
      }
    } finally {
      await kernels.dispose?.();
    }
  });
});

describe("wasm matmul: results do not depend on the thread count or the build", () => {
  it("Q8_0, Q4_0, Q5_0 and Q5_1 (plain and interleaved), Q4_1, Q4_K, Q5_K, Q6_K, F16 and F32 give the same bits on 1 to 4 threads (rows split mid-tile), relaxed SIMD or not", async () => {
    const setups = BUILDS.flatMap((relaxedSimd) => [1, 2, 3, 4].map((threads) => ({ threads, relaxedSimd })));
    const kernels = await Promise.all(setups.map(({ threads, relaxedSimd }) => createWasmKernels({ threads, minBytesPerThread: 0, relaxedSimd })));
    try {
      const next = random(4242);
      const types = [GgmlType.Q8_0, KernelLayout.Q8_0_X4, GgmlType.Q4_0, KernelLayout.Q4_0_X4, GgmlType.Q4_1, GgmlType.Q5_0, KernelLayout.Q5_0_X4, GgmlType.Q5_1, KernelLayout.Q5_1_X4, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.F16, GgmlType.F32];
      for (const type of types) {
        // 23 rows: each split puts some thread's share across a tile (or a group) of four rows,
        // and the interleaved layouts keep 3 plain rows after their 5 groups; batch 5 leaves an
        // odd last row for the batched tile, batch 1 is decode's path.
        const w = randomMatrix(plainTypeOf(type), 23, 256, next);
        // Interleaved: each kernel instance lays out its own copy (the matrix lives outside their memory).
        const matrices = kernels.map((k) => (type !== plainTypeOf(type) ? k.prepareMatrix!(w) : w));
        assert.ok(matrices.every((m) => m.type === type));
        for (const batch of [1, 5]) {
          const x = randomActivations(batch * 256, next);
          const results = kernels.map((k, i) => {
            const out = new Float32Array(batch * 23).fill(NaN);
            k.matmul(out, matrices[i]!, x, batch);
            return out;
          });
          for (let k = 1; k < results.length; k++) {
            const { threads, relaxedSimd } = setups[k]!;
            assert.deepEqual(results[k], results[0], `${GgmlType[type]} batch ${batch}, ${threads} threads${relaxedSimd ? ", relaxed SIMD" : ""} vs 1`);
          }
          assertWithin(results[0]!, reference(w, x, batch), errorBounds(w, x, batch, type !== GgmlType.F16 && type !== GgmlType.F32), `${GgmlType[type]} batch ${batch}`);
        }
      }
    } finally {
      await Promise.all(kernels.map((k) => k.dispose?.()));
    }
  });
});

describe("wasm matmul: a batch row's result does not depend on how the batch divides", () => {
  it("rows of a batch of 9 (two groups of four and one alone) give the bits of the same rows in batches of 2 and 7", async () => {
    const kernels = await createWasmKernels({ threads: 2, minBytesPerThread: 0 });
    try {
      const next = random(99);
      for (const type of [GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.F32]) {
        const w = kernels.prepareMatrix!(randomMatrix(type, 13, 256, next));
        const x = randomActivations(9 * 256, next);
        const whole = new Float32Array(9 * 13);
        kernels.matmul(whole, w, x, 9);
        const head = new Float32Array(2 * 13);
        const tail = new Float32Array(7 * 13);
        kernels.matmul(head, w, x.subarray(0, 2 * 256), 2);
        kernels.matmul(tail, w, x.subarray(2 * 256), 7);
        assert.deepEqual(whole, Float32Array.of(...head, ...tail), GgmlType[type]);
      }
    } finally {
      await kernels.dispose?.();
    }
  });
});

describe("wasm matmul: special half-precision values", () => {
  it("F16 infinities, NaN, subnormals and signed zeros convert as the reference does (SIMD, tail and batch paths)", async () => {
    const kernels = await createWasmKernels({ threads: 1 });
    try {
      const cols = 11; // columns 0..7 go through SIMD lanes, 8..10 through the scalar tail
      // +inf, -inf, NaN, smallest and largest subnormal, -0, 1, -2, 65504 (largest finite), 3 * 2^-24, 0.5.
      const specials = [0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0003, 0x3800];
      // One special value per row, at a different column each time (all 11 columns over 22 rows), zeros elsewhere.
      const rows = specials.length * 2;
      const halves = new Uint16Array(rows * cols);
      for (let r = 0; r < rows; r++) halves[r * cols + ((r * 5) % cols)] = specials[r % specials.length]!;
      const w = { type: GgmlType.F16, rows, cols, data: new Uint8Array(halves.buffer) };
      for (const batch of [1, 2]) {
        const x = new Float32Array(batch * cols).fill(0.5);
        const out = new Float32Array(batch * rows);
        kernels.matmul(out, w, x, batch);
        const expected = reference(w, x, batch);
        for (let i = 0; i < out.length; i++) assert.ok(Object.is(out[i], expected[i]), `out[${i}], batch ${batch}: ${out[i]} vs ${expected[i]}`);
      }
    } finally {
      await kernels.dispose?.();
    }
  });
});

describe("wasm matmul: special block scales in the interleaved decode loops", () => {
  const BLOCK_BYTES = new Map([
    [GgmlType.Q4_0, 18],
    [GgmlType.Q8_0, 34],
    [GgmlType.Q5_0, 22],
    [GgmlType.Q5_1, 24],
  ]);

  /** Element e's integer value (q - 8, q, q - 16, q) in the block at `at`, from its bytes (ggml's layouts). */
  function blockValue(type: GgmlType, data: Uint8Array, at: number, e: number): number {
    if (type === GgmlType.Q8_0) return (data[at + 2 + e]! << 24) >> 24;
    if (type === GgmlType.Q4_0) return (e < 16 ? data[at + 2 + e]! & 15 : data[at + 2 + e - 16]! >> 4) - 8;
    const base = type === GgmlType.Q5_1 ? at + 2 : at; // Q5_1's minimum before the fifth bits
    const nibble = e < 16 ? data[base + 6 + e]! & 15 : data[base + 6 + e - 16]! >> 4;
    const fifth = (data[base + 2 + (e >> 3)]! >> (e & 7)) & 1;
    return nibble + 16 * fifth - (type === GgmlType.Q5_1 ? 0 : 16);
  }

  /**
   * Row r of a Q4_0 / Q8_0 / Q5_0 / Q5_1 matrix times activations that int8 quantization keeps
   * exactly, in float64: per block its scale times the exact integer sum of q * x (q - 8 for
   * Q4_0, q - 16 for Q5_0), plus Q5_1's minimum times the sum of x, the way the decode loops
   * compute it, so an infinite or NaN scale or minimum gives the same non-finite result.
   */
  function blockwiseDot(type: GgmlType, data: Uint8Array, r: number, cols: number, x: Float32Array): number {
    const blockBytes = BLOCK_BYTES.get(type)!;
    let sum = 0;
    for (let b = 0; b < cols / 32; b++) {
      const at = (r * (cols / 32) + b) * blockBytes;
      let t = 0;
      let xs = 0;
      for (let e = 0; e < 32; e++) {
        t += blockValue(type, data, at, e) * x[b * 32 + e]!;
        xs += x[b * 32 + e]!;
      }
      sum += t * f16ToF32(data[at]! | (data[at + 1]! << 8));
      // Q5_1's minimum times the block's activations (their sum is exact: int8 quantization keeps them).
      if (type === GgmlType.Q5_1) sum += f16ToF32(data[at + 2]! | (data[at + 3]! << 8)) * xs;
    }
    return sum;
  }

  it("Q4_0_X4, Q8_0_X4, Q5_0_X4 and Q5_1_X4 groups whose scales (and Q5_1's minimums) hold infinities, NaN, subnormals or -0 give each block's scale times its exact sum", async () => {
    const kernels = await createWasmKernels({ threads: 1 });
    try {
      const next = random(515);
      // +inf, -inf, NaN, the smallest and largest subnormal, -0 and the largest finite half.
      const specials = [0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff, 0x8000, 0x7bff];
      for (const [type, blockBytes] of BLOCK_BYTES) {
        const rows = 12;
        const cols = 128;
        const w = randomMatrix(type, rows, cols, next);
        // Row r's block r % 4 takes special r % 7 (rows 7 and 8 repeat two): every group of four rows holds several.
        for (let r = 0; r < specials.length + 2; r++) {
          const at = (r * (cols / 32) + (r % 4)) * blockBytes;
          w.data[at] = specials[r % specials.length]! & 0xff;
          w.data[at + 1] = specials[r % specials.length]! >> 8;
          if (type !== GgmlType.Q5_1) continue;
          // And a minimum of the next block: a special minimum must reach the result the same way.
          const next = (r * (cols / 32) + ((r + 1) % 4)) * blockBytes;
          w.data[next + 2] = specials[r % specials.length]! & 0xff;
          w.data[next + 3] = specials[r % specials.length]! >> 8;
        }
        const x = exactlyQuantizableActivations(cols, next);
        const out = new Float32Array(rows);
        kernels.matmul(out, kernels.prepareMatrix!(w), x, 1);
        const bounds = errorBounds(w, x, 1, false);
        const expected = Array.from({ length: rows }, (_, r) => blockwiseDot(type, w.data, r, cols, x));
        for (let r = 0; r < rows; r++) {
          const label = `${GgmlType[type]} row ${r}: ${out[r]}, expected ${expected[r]}`;
          // Which non-finite value a sum ends in does not depend on the order of its terms.
          if (!Number.isFinite(expected[r]!)) assert.ok(Object.is(out[r], Math.fround(expected[r]!)), label);
          else assert.ok(Math.abs(out[r]! - expected[r]!) <= 2 * bounds[r]!, label);
        }
        assert.ok(expected.some((v) => Number.isNaN(v)) && expected.some((v) => Math.abs(v) === Infinity), `${GgmlType[type]}: the specials reach the results`);
      }
    } finally {
      await kernels.dispose?.();
    }
  });
});

describe("wasm kernels: prepareMatrix", () => {
  let kernels: Kernels;
  before(async () => (kernels = await createWasmKernels({ threads: 2 })));
  after(() => kernels.dispose?.());

  it("interleaves Q4_0, Q8_0, Q5_0 and Q5_1 by four rows, and the reference kernel reads the layouts to the same values", () => {
    const next = random(99);
    for (const [type, layout] of [
      [GgmlType.Q4_0, KernelLayout.Q4_0_X4],
      [GgmlType.Q8_0, KernelLayout.Q8_0_X4],
      [GgmlType.Q5_0, KernelLayout.Q5_0_X4],
      [GgmlType.Q5_1, KernelLayout.Q5_1_X4],
    ] as const) {
      for (const rows of [4, 7, 12]) {
        const w = randomMatrix(type, rows, 96, next);
        const prepared = kernels.prepareMatrix!(w);
        assert.equal(prepared.type, layout);
        assert.equal(prepared.data.byteLength, w.data.byteLength);
        assert.notDeepEqual(prepared.data, w.data, "the bytes moved");
        const x = randomActivations(3 * 96, next);
        const shape = `${GgmlType[type]} [${rows}, 96]`;
        assert.deepEqual(reference(prepared, x, 3), reference(w, x, 3), `${shape}: every row, grouped or in the plain tail`);
      }
    }
  });

  it("rewrites bytes in its own memory in place, once, and leaves other matrices as they are", () => {
    const next = random(100);
    const source = randomMatrix(GgmlType.Q4_0, 8, 64, next);
    const view = kernels.allocate!(source.data.byteLength);
    view.set(source.data);
    const inMemory = { ...source, data: view };
    const prepared = kernels.prepareMatrix!(inMemory);
    assert.equal(prepared.data, view, "the same view, rewritten");
    assert.notDeepEqual(view, source.data);
    assert.equal(kernels.prepareMatrix!(inMemory), prepared, "the same bytes are not interleaved twice");
    const x = randomActivations(64, next);
    const out = new Float32Array(8);
    kernels.matmul(out, prepared, x, 1);
    assertWithin(out, reference(source, x, 1), errorBounds(source, x, 1, true), "in place");
    for (const w of [randomMatrix(GgmlType.Q4_K, 8, 256, next), randomMatrix(GgmlType.Q4_0, 3, 64, next), randomMatrix(GgmlType.F32, 8, 7, next)]) {
      assert.equal(kernels.prepareMatrix!(w), w, `${GgmlType[w.type]} [${w.rows}, ${w.cols}] stays`);
    }
    kernels.release!(view);
  });
});
