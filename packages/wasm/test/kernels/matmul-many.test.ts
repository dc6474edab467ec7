// matmulMany: several matrices sharing one input (q/k/v, gate/up) in one job;
// matmulGated: gate and up with the activation applied, in one job.
// Each output row is computed by the same code as a single matmul, so the
// results must equal separate matmul calls exactly; those are checked against
// the reference in matmul.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { GgmlType } from "@infer/formats";
import type { Kernels, WeightMatrix } from "../../src/kernels/types.js";
import { gatedActivation } from "../../src/kernels/ops.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, random, randomActivations, randomMatrix } from "./helpers.js";

for (const threads of [1, 2, 3, 4]) {
  describe(`wasm matmulMany, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0 })));
    after(() => kernels.dispose?.());

    function separately(ws: WeightMatrix[], x: Float32Array, batch: number): Float32Array[] {
      return ws.map((w) => {
        const out = new Float32Array(batch * w.rows);
        kernels.matmul(out, w, x, batch);
        return out;
      });
    }

    it("mixed types equal separate matmul calls, batch 1 and 5", () => {
      const next = random(21);
      const cols = 256;
      const types = [GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.F16, GgmlType.Q5_K, GgmlType.Q8_0];
      const ws = types.map((type, i) => randomMatrix(type, 3 + 2 * i, cols, next));
      for (const batch of [1, 5]) {
        const x = randomActivations(batch * cols, next);
        const outs = ws.map((w) => new Float32Array(batch * w.rows).fill(NaN));
        kernels.matmulMany!(outs, ws, x, batch);
        assert.deepEqual(outs, separately(ws, x, batch));
      }
    });

    it("more matrices than one job carries, and outputs in the kernels' memory", () => {
      const next = random(22);
      const ws = Array.from({ length: 11 }, (_, i) => randomMatrix(i % 2 ? GgmlType.Q4_0 : GgmlType.BF16, 1 + i, 64, next));
      const x = randomActivations(2 * 64, next);
      const views = ws.map((w) => kernels.allocate!(2 * w.rows * 4));
      const outs = views.map((view) => new Float32Array(view.buffer, view.byteOffset, view.byteLength / 4));
      kernels.matmulMany!(outs, ws, x, 2);
      assert.deepEqual(outs.map((out) => Float32Array.from(out)), separately(ws, x, 2));
      for (const view of views) kernels.release!(view);
    });

    it("rejects mismatched inputs", () => {
      const next = random(23);
      const a = randomMatrix(GgmlType.Q8_0, 2, 64, next);
      const b = randomMatrix(GgmlType.Q8_0, 2, 96, next);
      const x = new Float32Array(96);
      assertInferenceError(() => kernels.matmulMany!([new Float32Array(2), new Float32Array(2)], [a, b], x, 1), "INTERNAL", /columns/);
      assertInferenceError(() => kernels.matmulMany!([new Float32Array(2)], [a, a], x, 1), "INTERNAL", /one output per matrix/);
    });
  });
}

for (const threads of [1, 2, 3, 4]) {
  describe(`wasm matmulGated, ${threads} thread${threads > 1 ? "s" : ""}`, () => {
    let kernels: Kernels;
    before(async () => (kernels = await createWasmKernels({ threads, minBytesPerThread: 0 })));
    after(() => kernels.dispose?.());

    // gate and up rows come from the same matmul code as kernels.matmul (checked
    // against the reference in matmul.test.ts), so only the activation differs:
    // float32 exp / tanh (within an ulp or two), one division and two products:
    // error at most 2^-20 * |up| * (1 + |g|) * (1 + |z|), z the GELU's tanh argument
    // (its 1 + tanh(z) loses relative precision for large negative z, not absolute).
    for (const activation of ["silu", "gelu_tanh"] as const) {
      it(`${activation}: equals act(gate·x) * (up·x) from separate matmuls, batch 1 and 3, mixed types`, () => {
        const next = random(activation === "silu" ? 31 : 32);
        const cols = 256;
        for (const [gateType, upType] of [
          [GgmlType.Q4_K, GgmlType.Q6_K],
          [GgmlType.Q8_0, GgmlType.F16],
          [GgmlType.Q5_K, GgmlType.Q4_0],
        ] as const) {
          const gate = randomMatrix(gateType, 13, cols, next);
          const up = randomMatrix(upType, 13, cols, next);
          for (const batch of [1, 3]) {
            const x = randomActivations(batch * cols, next);
            const [g, u] = separately([gate, up], x, batch);
            const expected = new Float32Array(batch * 13);
            gatedActivation(expected, g!, u!, expected.length, activation);
            const out = new Float32Array(batch * 13).fill(NaN);
            kernels.matmulGated!(out, gate, up, x, batch, activation);
            for (let i = 0; i < out.length; i++) {
              const gi = g![i]!;
              const z = Math.sqrt(2 / Math.PI) * (gi + 0.044715 * gi ** 3);
              const bound = 2 ** -20 * Math.abs(u![i]!) * (1 + Math.abs(gi)) * (1 + Math.abs(z));
              const error = Math.abs(out[i]! - expected[i]!);
              assert.ok(error <= bound, `${GgmlType[gateType]}/${GgmlType[upType]} batch ${batch} out[${i}] = ${out[i]}, expected ${expected[i]}`);
            }
          }
        }
      });
    }

    it("a long batch: each thread's rows go through its tile of up products several times", () => {
      // 102 rows (not a whole number of four-row groups) by 600 tokens: gatedTileRows(600) = 24
      // rows a tile, so one thread's rows take five tiles and a last partial one.
      const next = random(34);
      const [rows, cols, batch] = [102, 96, 600];
      for (const [gateType, upType] of [
        [GgmlType.Q8_0, GgmlType.Q4_0],
        [GgmlType.F16, GgmlType.Q8_0],
      ] as const) {
        const gate = randomMatrix(gateType, rows, cols, next);
        const up = randomMatrix(upType, rows, cols, next);
        const x = randomActivations(batch * cols, next);
        const [g, u] = separately([gate, up], x, batch);
        const expected = new Float32Array(batch * rows);
        gatedActivation(expected, g!, u!, expected.length, "silu");
        const out = new Float32Array(batch * rows).fill(NaN);
        kernels.matmulGated!(out, gate, up, x, batch, "silu");
        for (let i = 0; i < out.length; i++) {
          const bound = 2 ** -20 * Math.abs(u![i]!) * (1 + Math.abs(g![i]!));
          const error = Math.abs(out[i]! - expected[i]!);
          assert.ok(error <= bound, `${GgmlType[gateType]}/${GgmlType[upType]} out[${i}] = ${out[i]}, expected ${expected[i]}`);
        }
      }
    });

    function separately(ws: WeightMatrix[], x: Float32Array, batch: number): Float32Array[] {
      return ws.map((w) => {
        const out = new Float32Array(batch * w.rows);
        kernels.matmul(out, w, x, batch);
        return out;
      });
    }

    it("rejects gate and up of different heights", () => {
      const next = random(33);
      const gate = randomMatrix(GgmlType.Q8_0, 4, 64, next);
      const up = randomMatrix(GgmlType.Q8_0, 5, 64, next);
      assertInferenceError(() => kernels.matmulGated!(new Float32Array(5), gate, up, new Float32Array(64), 1, "silu"), "INTERNAL", /rows/);
    });
  });
}
