/**
 * WeightSource.release: once a model is built the source lets go of its stored
 * tensors (a model quantized at load would otherwise keep the float file it
 * was read from), while the matrices it handed out and its totals stay.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { GgmlType, rowBytes } from "@infer/formats";
import { WeightSource, type StoredTensor } from "../../src/engine/weights.js";

test("release drops the stored tensors and keeps the handed-out matrices and totals", () => {
  const rows = 4;
  const cols = 64;
  const floats = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i));
  const tensors = new Map<string, StoredTensor>([["w", { shape: [rows, cols], type: GgmlType.F32, data: new Uint8Array(floats.buffer) }]]);
  const source = new WeightSource("test", "gguf", tensors, undefined, { quantize: GgmlType.Q8_0 });
  const matrix = source.matrix("w", rows, cols);
  const copy = matrix.data.slice();
  const { weightBytes, parameterCount } = source;
  assert.equal(weightBytes, rows * rowBytes(GgmlType.Q8_0, cols));
  assert.equal(parameterCount, rows * cols);

  source.release();
  assert.equal(source.has("w"), false, "the stored tensor is gone");
  assert.equal(tensors.size, 1, "the caller's map is left as it was");
  assert.equal(source.weightBytes, weightBytes);
  assert.equal(source.parameterCount, parameterCount);
  assert.equal(matrix.type, GgmlType.Q8_0);
  assert.deepEqual(matrix.data, copy, "the handed-out matrix keeps its bytes");
  assert.equal(source.matrices.get("w"), matrix);
});
