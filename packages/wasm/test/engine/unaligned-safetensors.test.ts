/**
 * A valid safetensors file whose data section starts at an offset not divisible
 * by 4 (its header padded by one space, as JSON allows) loads and runs like the
 * aligned original: F32 vectors are re-aligned like matrices, not refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "@infer/core";
import "../../src/index.js";
import { writeRandomHf } from "../../src/testing/index.js";

/** Rewrites a safetensors file with its header one byte longer (a trailing space). */
async function shiftDataSection(path: string): Promise<number> {
  const bytes = await readFile(path);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const out = Buffer.alloc(bytes.length + 1);
  out.writeBigUInt64LE(BigInt(headerLength + 1), 0);
  bytes.copy(out, 8, 8, 8 + headerLength);
  out[8 + headerLength] = 0x20;
  bytes.copy(out, 9 + headerLength, 8 + headerLength);
  await writeFile(path, out);
  return 9 + headerLength;
}

async function greedy(folder: string): Promise<number[]> {
  const model = await loadModel(folder, { backend: "wasm" });
  try {
    const result = await model.generateText("hello", { temperature: 0, maxTokens: 12 });
    return result.tokens.map((t) => t.id);
  } finally {
    await model.close();
  }
}

for (const architecture of ["llama", "qwen2", "gemma3"] as const) {
  test(`${architecture}: an F32 safetensors data section at an odd offset loads and generates as the aligned file does`, async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-unaligned-"));
    try {
      await writeRandomHf(dir, { architecture, seed: 5, dtype: "F32" });
      const expected = await greedy(dir);
      const dataOffset = await shiftDataSection(join(dir, "model.safetensors"));
      assert.notEqual(dataOffset % 4, 0);
      assert.deepEqual(await greedy(dir), expected);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}
