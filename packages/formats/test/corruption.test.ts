// Randomly corrupted and truncated files must fail with an InferenceError
// (or still parse), never crash with another error or hang.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InferenceError } from "@infer/core";
import { GgmlType, GgufValueType, parseGguf, parseGgufHeader, parseSafetensors, writeGguf, writeSafetensors } from "../src/index.js";

/** Deterministic generator of integers in [0, n). */
function randomInts(seed: number): (n: number) => number {
  return (n) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
}

function corruptAndParse(bytes: Uint8Array, headerBytes: number, parse: (bytes: Uint8Array) => unknown, trials: number): Map<string, number> {
  const next = randomInts(42);
  const outcomes = new Map<string, number>();
  for (let trial = 0; trial < trials; trial++) {
    const copy = bytes.slice(0, trial % 5 === 0 ? next(bytes.length) : bytes.length);
    const flips = 1 + next(4);
    for (let f = 0; f < flips && copy.length > 0; f++) copy[next(Math.min(copy.length, headerBytes))] = next(256);
    let outcome = "parsed";
    try {
      parse(copy);
    } catch (error) {
      assert.ok(error instanceof InferenceError, `trial ${trial}: ${String(error)}`);
      outcome = error.code;
    }
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  }
  return outcomes;
}

describe("corrupted files", () => {
  it("GGUF: every failure is an InferenceError", () => {
    const values = Float32Array.from({ length: 512 }, (_, i) => Math.sin(i));
    const bytes = writeGguf({
      metadata: {
        name: "x",
        count: 5,
        tokens: ["p", "q"],
        scores: Float32Array.from([1, 2]),
        nested: {
          type: GgufValueType.ARRAY,
          itemType: GgufValueType.ARRAY,
          value: [{ type: GgufValueType.ARRAY, itemType: GgufValueType.INT32, value: Int32Array.from([1]) }],
        },
      },
      tensors: [
        { name: "t", shape: [256, 2], type: GgmlType.Q4_K, data: values },
        { name: "u", shape: [32], type: GgmlType.F16, data: values.subarray(0, 32) },
      ],
    });
    const outcomes = corruptAndParse(bytes, 400, (b) => parseGguf(b, "fuzz.gguf"), 3000);
    assert.ok((outcomes.get("MODEL_FORMAT") ?? 0) > 100, "the corruptions do hit the validation");
    // The header read from a prefix (readGgufHeader) agrees with the whole parse: the same
    // error, or the same header, or "read more" while the prefix is shorter than the file.
    let partial = 0;
    let trial = 0;
    corruptAndParse(bytes, 400, (b) => {
      // Every prefix length for one trial in ten, a few for the rest.
      const lengths = trial++ % 10 === 0 ? Array.from({ length: b.length }, (_, i) => i + 1) : [8, 40, 97, 200, 333, b.length];
      let whole: unknown;
      try {
        whole = parseGguf(b, "fuzz.gguf");
      } catch (error) {
        whole = error;
      }
      for (const length of lengths) {
        let header: unknown;
        try {
          header = parseGgufHeader(b.subarray(0, Math.min(length, b.length)), b.length, "fuzz.gguf");
        } catch (error) {
          header = error;
        }
        if (header === undefined) {
          assert.ok(length < b.length, "a whole file never needs more bytes");
          partial++;
        } else if (whole instanceof Error) {
          assert.equal((header as Error).message, whole.message, `prefix ${length}`);
        } else {
          const parsed = whole as ReturnType<typeof parseGguf>;
          assert.deepEqual((header as typeof parsed).tensors, parsed.tensors, `prefix ${length}`);
          assert.deepEqual([...(header as typeof parsed).metadata.entries()], [...parsed.metadata.entries()], `prefix ${length}`);
        }
      }
      if (whole instanceof Error) throw whole;
    }, 1500);
    assert.ok(partial > 1000, `prefixes shorter than the header: ${partial}`);
  });

  it("safetensors: every failure is an InferenceError", () => {
    const bytes = writeSafetensors(
      [
        { name: "a", dtype: "F32", shape: [2, 2], data: Float32Array.from([1, 2, 3, 4]) },
        { name: "b", dtype: "BF16", shape: [3], data: Float32Array.from([1, 2, 3]) },
      ],
      { k: "v" },
    );
    const outcomes = corruptAndParse(bytes, 200, (b) => parseSafetensors(b, "fuzz.safetensors"), 3000);
    assert.ok((outcomes.get("MODEL_FORMAT") ?? 0) > 100, "the corruptions do hit the validation");
  });
});
