// createWasmKernels beyond the arithmetic: weights read in place from
// allocate() views, zero-copy activations, input validation with stable error
// codes, dispose, and a process that never disposes still exiting.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { referenceMatmul } from "../../src/kernels/reference.js";
import type { Kernels, WeightMatrix } from "../../src/kernels/types.js";
import { availableParallelism } from "node:os";
import { GgmlType } from "@infer/formats";
import { platform } from "#platform";
import { createWasmKernels, relaxedSimdSupported } from "../../src/kernels/wasm/index.js";
import { assertInferenceError, assertWithin, errorBounds, random, randomActivations, randomMatrix } from "./helpers.js";

function reference(w: WeightMatrix, x: Float32Array, batch: number): Float32Array {
  const out = new Float32Array(batch * w.rows);
  referenceMatmul(out, w, x, batch);
  return out;
}

describe("wasm kernels: memory API", () => {
  let kernels: Kernels;
  before(async () => (kernels = await createWasmKernels({ threads: 2, minBytesPerThread: 0 })));
  after(() => kernels.dispose?.());

  it("allocate returns zeroed, aligned views that release reuses", () => {
    const first = kernels.allocate!(1000, 256);
    assert.equal(first.byteLength, 1000);
    assert.equal(first.byteOffset % 256, 0);
    assert.ok(first.every((byte) => byte === 0));
    first.fill(7);
    kernels.release!(first);
    const second = kernels.allocate!(1000, 256);
    assert.equal(second.byteOffset, first.byteOffset, "the released range is reused");
    assert.ok(second.every((byte) => byte === 0), "a reused range is zeroed again");
    kernels.release!(second);
  });

  it("reads weights in allocate() views in place: changed bytes are seen on the next call", () => {
    const next = random(3);
    const a = randomMatrix(GgmlType.Q4_0, 9, 64, next);
    const b = randomMatrix(GgmlType.Q4_0, 9, 64, next);
    const data = kernels.allocate!(a.data.byteLength);
    data.set(a.data);
    const w = { ...a, data };
    const x = randomActivations(64, next);
    const out = new Float32Array(9);
    kernels.matmul(out, w, x, 1);
    assertWithin(out, reference(a, x, 1), errorBounds(a, x, 1, true), "first weights");
    data.set(b.data);
    kernels.matmul(out, w, x, 1);
    assertWithin(out, reference(b, x, 1), errorBounds(b, x, 1, true), "overwritten weights");
    kernels.release!(data);
  });

  it("takes x and out from allocate() views without staging, and memory growth keeps them valid", () => {
    const next = random(4);
    const w = randomMatrix(GgmlType.F16, 11, 40, next);
    const xView = kernels.allocate!(3 * 40 * 4);
    const outView = kernels.allocate!(3 * 11 * 4);
    const x = new Float32Array(xView.buffer, xView.byteOffset, 3 * 40);
    const out = new Float32Array(outView.buffer, outView.byteOffset, 3 * 11);
    x.set(randomActivations(3 * 40, next));
    // 8 MiB more forces the memory to grow; the earlier views still address it.
    const big = kernels.allocate!(8 << 20);
    kernels.matmul(out, w, x, 3);
    assertWithin(out, reference(w, x, 3), errorBounds(w, x, 3, false), "allocated x/out");
    for (const view of [big, xView, outView]) kernels.release!(view);
  });

  it("keeps one copy per foreign weight array and tells them apart", () => {
    const next = random(5);
    const a = randomMatrix(GgmlType.Q6_K, 3, 256, next);
    const b = randomMatrix(GgmlType.Q6_K, 3, 256, next);
    const x = randomActivations(256, next);
    const out = new Float32Array(3);
    for (const w of [a, b, a, b]) {
      kernels.matmul(out, w, x, 1);
      assertWithin(out, reference(w, x, 1), errorBounds(w, x, 1, true), "alternating weights");
    }
  });

  it("reads more of a foreign weight array when a later call's shape needs it", () => {
    const next = random(6);
    const full = randomMatrix(GgmlType.Q8_0, 6, 64, next);
    const firstRows = { ...full, rows: 2 };
    const x = randomActivations(64, next);
    const out = new Float32Array(6);
    kernels.matmul(out, firstRows, x, 1);
    kernels.matmul(out, full, x, 1);
    assertWithin(out, reference(full, x, 1), errorBounds(full, x, 1, true), "all six rows");
  });

  it("release rejects views that are not its own", () => {
    assertInferenceError(() => kernels.release!(new Uint8Array(16)), "INTERNAL", /allocate/);
  });
});

describe("wasm kernels: bad input", () => {
  let kernels: Kernels;
  before(async () => (kernels = await createWasmKernels({ threads: 2 })));
  after(() => kernels.dispose?.());

  const x = new Float32Array(64);
  const out = new Float32Array(4);

  it("rejects rows that are not whole blocks", () => {
    const w = { type: GgmlType.Q8_0, rows: 1, cols: 40, data: new Uint8Array(68) };
    assertInferenceError(() => kernels.matmul(out, w, x, 1), "MODEL_FORMAT", /Q8_0/);
  });

  it("rejects weight data shorter than its shape", () => {
    const w = { type: GgmlType.Q4_K, rows: 2, cols: 256, data: new Uint8Array(287) };
    assertInferenceError(() => kernels.matmul(out, w, new Float32Array(256), 1), "MODEL_FORMAT", /288 bytes/);
  });

  it("rejects unknown and undecodable types", () => {
    const unknown = { type: 99 as GgmlType, rows: 1, cols: 32, data: new Uint8Array(64) };
    assertInferenceError(() => kernels.matmul(out, unknown, x, 1), "UNSUPPORTED_DTYPE");
    const q2k = { type: GgmlType.Q2_K, rows: 1, cols: 256, data: new Uint8Array(84) };
    assertInferenceError(() => kernels.matmul(out, q2k, new Float32Array(256), 1), "UNSUPPORTED_DTYPE");
  });

  it("rejects buffers too small for the shape and non-integer shapes", () => {
    const w = { type: GgmlType.F32, rows: 4, cols: 16, data: new Uint8Array(256) };
    assertInferenceError(() => kernels.matmul(new Float32Array(3), w, x, 1), "INTERNAL", /too small/);
    assertInferenceError(() => kernels.matmul(out, w, new Float32Array(15), 1), "INTERNAL", /too small/);
    assertInferenceError(() => kernels.matmul(out, w, x, 0.5), "INTERNAL");
  });

  it("rejects bad options", async () => {
    await assert.rejects(createWasmKernels({ threads: 0 }), (error: unknown) => {
      assert.equal((error as { code?: string }).code, "INVALID_OPTION");
      return true;
    });
    await assert.rejects(createWasmKernels({ minBytesPerThread: -1 }), /minBytesPerThread/);
    await assert.rejects(createWasmKernels({ relaxedSimd: "yes" as unknown as boolean }), (error: unknown) => {
      assert.equal((error as { code?: string }).code, "INVALID_OPTION");
      assert.match((error as Error).message, /relaxedSimd must be a boolean/);
      return true;
    });
    if (!relaxedSimdSupported()) {
      await assert.rejects(createWasmKernels({ relaxedSimd: true }), (error: unknown) => {
        assert.equal((error as { code?: string }).code, "INVALID_OPTION");
        assert.match((error as Error).message, /no WebAssembly relaxed SIMD.*--experimental-wasm-relaxed-simd/);
        return true;
      });
    }
  });
});

describe("wasm kernels: lifetime", () => {
  it("defaults to one thread per physical core", async () => {
    const cores = platform.coreCount();
    assert.ok(Number.isInteger(cores) && cores >= 1 && cores <= availableParallelism());
    const kernels = await createWasmKernels();
    const build = relaxedSimdSupported() ? "wasm-relaxed-simd" : "wasm-simd";
    assert.equal(kernels.name, `${build} (${cores} thread${cores === 1 ? "" : "s"})`);
    await kernels.dispose!();
  });

  it("dispose stops the workers; later calls throw CLOSED", async () => {
    const kernels = await createWasmKernels({ threads: 3 });
    await kernels.dispose!();
    await kernels.dispose!();
    const w = { type: GgmlType.F32, rows: 1, cols: 4, data: new Uint8Array(16) };
    assertInferenceError(() => kernels.matmul(new Float32Array(1), w, new Float32Array(4), 1), "CLOSED");
    assertInferenceError(() => kernels.allocate!(16), "CLOSED");
  });

  it("a process that never disposes its kernels still exits", () => {
    const module = new URL("../../src/kernels/wasm/index.js", import.meta.url).href;
    const script =
      `const { createWasmKernels } = await import(${JSON.stringify(module)});` +
      `const k = await createWasmKernels({ threads: 3, minBytesPerThread: 0 });` +
      `const out = new Float32Array(2);` +
      `k.matmul(out, { type: 0, rows: 2, cols: 4, data: new Uint8Array(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]).buffer) }, new Float32Array([1, 1, 1, 1]), 1);` +
      `console.log(out.join(","));`;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { timeout: 20_000, encoding: "utf8" });
    assert.equal(child.signal, null, "the child was killed by the timeout: it did not exit on its own");
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), "10,26");
  });
});
