/**
 * The backward through a frozen block-quantized (or half-float) base on the
 * WebAssembly kernels: Kernels.dequantizeTransposed against the TypeScript
 * dequantizer, and dx += dy · w in panels against frozenLinearBackward's
 * row-by-row reference, for every type the kernels read and the interleaved
 * layouts prepareMatrix gives, at 1 to 4 threads, on shapes that leave partial
 * tiles of four rows, partial groups and uneven thread shares.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { GgmlType } from "@infer/formats";
import { dequantizeMatrixRow } from "../../src/kernels/dequant.js";
import { KernelLayout, type Kernels, type MatrixType, type WeightMatrix } from "../../src/kernels/types.js";
import { frozenLinearBackward } from "../../src/train/ops/linear.js";
import { dequantizedBackward } from "../../src/train/ops/dequantized-backward.js";
import { random, randomMatrix } from "../kernels/helpers.js";
import { kernelPools, randomValues, relativeError } from "./gradcheck.js";

const pools = kernelPools();

const STORED = [GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.F16, GgmlType.BF16, GgmlType.F32];
/** The types prepareMatrix interleaves, and the layout it gives them. */
const INTERLEAVED: ReadonlyMap<GgmlType, KernelLayout> = new Map([
  [GgmlType.Q8_0, KernelLayout.Q8_0_X4],
  [GgmlType.Q4_0, KernelLayout.Q4_0_X4],
  [GgmlType.Q5_0, KernelLayout.Q5_0_X4],
  [GgmlType.Q5_1, KernelLayout.Q5_1_X4],
]);

/** Each stored type, then each interleaved layout (made by each pool's prepareMatrix). */
const CASES: { name: string; type: GgmlType; layout?: KernelLayout }[] = [
  ...STORED.map((type) => ({ name: GgmlType[type]!, type })),
  ...[...INTERLEAVED].map(([type, layout]) => ({ name: KernelLayout[layout]!, type, layout })),
];

/** 14 rows: three groups of four and a plain tail of two; 512 columns: two K-quant super-blocks. */
const [ROWS, COLS] = [14, 512];

/** The matrix as these kernels read it: `w` itself, or its interleaved layout. */
function asRead(kernels: Kernels, w: WeightMatrix, layout: MatrixType | undefined): WeightMatrix {
  if (layout === undefined) return w;
  const prepared = kernels.prepareMatrix!({ ...w, data: w.data.slice() });
  assert.equal(prepared.type, layout);
  return prepared;
}

function dequantized(w: WeightMatrix): Float32Array {
  const values = new Float32Array(w.rows * w.cols);
  for (let r = 0; r < w.rows; r++) dequantizeMatrixRow(w, r, values, r * w.cols);
  return values;
}

describe("dequantizeTransposed on the WebAssembly kernels equals the TypeScript dequantizer, transposed", () => {
  for (const { name, type, layout } of CASES) {
    it(`${name}: panels of rows and columns, 1 to 4 threads`, () => {
      const w = randomMatrix(type, ROWS, COLS, random(70 + type + (layout ?? 0)));
      const values = dequantized(w);
      for (const kernels of pools) {
        const read = asRead(kernels, w, layout);
        const align = kernels.dequantizeTransposedAlign!(read.type);
        assert.ok(align > 0 && COLS % align === 0, `${name}: alignment ${align}`);
        // The whole matrix, then a panel that starts inside a group and ends before the tail.
        for (const [rowFrom, rowCount, colFrom, colCount] of [[0, ROWS, 0, COLS], [3, 9, align === 256 ? 256 : align, align === 256 ? 256 : 3 * align]] as const) {
          const out = new Float32Array(rowCount * colCount);
          kernels.dequantizeTransposed!(out, read, rowFrom, rowCount, colFrom, colCount);
          const expected = new Float32Array(rowCount * colCount);
          for (let j = 0; j < colCount; j++) {
            for (let r = 0; r < rowCount; r++) expected[j * rowCount + r] = values[(rowFrom + r) * COLS + colFrom + j]!;
          }
          // The kernels' scale * q - min in float32, the reference's in float64 then rounded: a rounding apart.
          const error = relativeError(out, expected);
          assert.ok(error < 1e-6, `${name}, panel at ${rowFrom}, ${colFrom}: relative error ${error.toExponential(2)}`);
        }
      }
    });
  }

  it("rejects panels outside the matrix or not in whole blocks", () => {
    const w = randomMatrix(GgmlType.Q4_K, 4, 512, random(1));
    const kernels = pools[0]!;
    const out = new Float32Array(4 * 512);
    assert.throws(() => kernels.dequantizeTransposed!(out, w, 0, 4, 32, 256), /whole blocks of 256/);
    assert.throws(() => kernels.dequantizeTransposed!(out, w, 2, 4, 0, 256), /not inside/);
  });
});

describe("a frozen quantized base's input gradient on the WebAssembly kernels equals the TypeScript reference", () => {
  for (const { name, type, layout } of CASES) {
    it(`${name}: dx += dy · w in one panel and in panels of rows and columns, 1 to 4 threads`, () => {
      const next = random(90 + type + (layout ?? 0));
      const w = randomMatrix(type, ROWS, COLS, next);
      const n = 7;
      const dy = randomValues(n * ROWS, next, 1, false) as Float32Array;
      const dx0 = randomValues(n * COLS, next, 0.1, false) as Float32Array;
      const expected = dx0.slice();
      frozenLinearBackward(expected, w, dy, n);
      for (const kernels of pools) {
        const read = asRead(kernels, w, layout);
        const align = kernels.dequantizeTransposedAlign!(read.type);
        // The default budget (one panel), then one that splits the rows into panels of eight and the columns by blocks.
        for (const budget of [undefined, 8 * align * 4]) {
          const got = dx0.slice();
          assert.ok(dequantizedBackward(kernels, got, read, dy, n, budget));
          const error = relativeError(got, expected);
          assert.ok(error < 1e-5, `${name}, budget ${budget ?? "default"}: relative error ${error.toExponential(2)}`);
        }
        if (type !== GgmlType.F32) {
          const got = dx0.slice();
          frozenLinearBackward(got, read, dy, n, kernels);
          assert.ok(relativeError(got, expected) < 1e-5, `${name}: frozenLinearBackward on the kernels`);
        }
      }
    });
  }

  it("leaves float64 runs (the gradient checks') to the reference", () => {
    const w = randomMatrix(GgmlType.Q8_0, 4, 32, random(2));
    const dx = new Float64Array(2 * 32) as unknown as Float32Array;
    assert.equal(dequantizedBackward(pools[0]!, dx, w, new Float32Array(2 * 4), 2), false);
  });
});
