import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isInferenceError } from "@infer/core";
import { assertGgufFile, hasGgufMagic } from "../src/gguf.js";

async function scratch(name: string, bytes: Uint8Array): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "infer-llama-cpp-"));
  const path = join(dir, name);
  await writeFile(path, bytes);
  return path;
}

/** A GGUF header: magic, version, tensor count, metadata count (little-endian). */
function header(version: number): Uint8Array {
  const bytes = Buffer.alloc(24);
  bytes.write("GGUF", 0, "latin1");
  bytes.writeUInt32LE(version, 4);
  return bytes;
}

test("hasGgufMagic sniffs the first four bytes only", async () => {
  assert.equal(await hasGgufMagic(await scratch("a.gguf", header(3))), true);
  assert.equal(await hasGgufMagic(await scratch("b.bin", Buffer.from("not a gguf file"))), false);
  assert.equal(await hasGgufMagic(await scratch("c.gguf", Buffer.from("GG"))), false);
  assert.equal(await hasGgufMagic("/nonexistent/model.gguf"), false);
});

test("assertGgufFile names the file and the problem", async () => {
  const expectCode = async (path: string, code: string, fragment: string) => {
    await assert.rejects(assertGgufFile(path), (error: unknown) => {
      assert.ok(isInferenceError(error), String(error));
      assert.equal(error.code, code);
      assert.ok(error.message.includes(path), error.message);
      assert.ok(error.message.includes(fragment), error.message);
      return true;
    });
  };
  await expectCode("/nonexistent/model.gguf", "MODEL_NOT_FOUND", "no model");
  await expectCode(await scratch("text.gguf", Buffer.from("hello world, this is text")), "MODEL_FORMAT", "not a GGUF");
  await expectCode(await scratch("short.gguf", Buffer.from("GGUF\x03\x00")), "MODEL_FORMAT", "truncated");
  await expectCode(await scratch("v9.gguf", header(9)), "MODEL_FORMAT", "version 9");
  await expectCode(tmpdir(), "MODEL_FORMAT", "not a file");
  const huge = Buffer.from(header(3));
  huge.writeBigUInt64LE(1n << 40n, 8); // 2^40 tensors in a 24-byte file
  await expectCode(await scratch("huge.gguf", huge), "MODEL_FORMAT", "more than its 24 bytes");
  await assertGgufFile(await scratch("ok.gguf", header(3)));
});
