// GGUF file types (general.file_type) and the quantization a model is described by.
import assert from "node:assert/strict";
import { test } from "node:test";
import { GGUF_FILE_TYPES, describeQuantization, fileTypeId } from "../src/index.js";

test("names the common GGUF file types as llama.cpp does", () => {
  assert.equal(GGUF_FILE_TYPES[0]?.name, "F32");
  assert.equal(GGUF_FILE_TYPES[7]?.name, "Q8_0");
  assert.equal(GGUF_FILE_TYPES[15]?.name, "Q4_K_M");
  assert.equal(GGUF_FILE_TYPES[32]?.name, "BF16");
  assert.equal(fileTypeId("Q4_0"), 2);
  assert.equal(fileTypeId("Q8_0"), 7);
  assert.equal(fileTypeId("Q4_K"), undefined, "Q4_K is a tensor type; its files are Q4_K_S or Q4_K_M");
});

test("describeQuantization reads general.file_type, else the dominant tensor type", () => {
  assert.deepEqual(describeQuantization(0, []), { bits: 32, group: 0 });
  assert.deepEqual(describeQuantization(7, []), { bits: 8, group: 32 }); // Q8_0
  assert.deepEqual(describeQuantization(15, []), { bits: 4, group: 256 }); // Q4_K_M
  assert.deepEqual(describeQuantization(32, []), { bits: 16, group: 0 }); // BF16
  // No file type: the Q4_0 matrix outweighs the F32 norms.
  const tensors = [
    { ggmlType: 0, dimensions: [64] },
    { ggmlType: 2, dimensions: [64, 64] },
    { ggmlType: 0, dimensions: [64] },
  ];
  assert.deepEqual(describeQuantization(undefined, tensors), { bits: 4, group: 32 });
  assert.deepEqual(describeQuantization(undefined, []), { bits: 0, group: 0 });
});
