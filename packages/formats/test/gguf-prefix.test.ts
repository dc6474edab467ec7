// The first metadata of a GGUF file from a bounded prefix: what discovery and the llama_cpp
// backend's adapter check read instead of a whole header.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { GgufValueType, hasGgufMagic, parseGgufMetadataPrefix, writeGguf } from "../src/index.js";
import { readGgufMetadataPrefix } from "../src/node/index.js";
import { assertInferenceError, assertRejectsWith } from "./helpers.js";

// Two keys, a vocabulary of about 190 KB, then one more key.
const vocabulary = Array.from({ length: 20_000 }, (_, i) => `token-${i}`);
const file = writeGguf({
  metadata: { "general.architecture": "llama", "general.file_type": 7, "tokenizer.ggml.tokens": vocabulary, "general.name": "after" },
  tensors: [],
});

describe("parseGgufMetadataPrefix", () => {
  it("reads the keys that end within the prefix, and says whether that was all", () => {
    const partial = parseGgufMetadataPrefix(file.subarray(0, 4096), file.length, "m.gguf")!;
    assert.equal(partial.complete, false);
    assert.equal(partial.version, 3);
    assert.deepEqual([...partial.metadata.keys()], ["general.architecture", "general.file_type"]);
    assert.deepEqual(partial.metadata.get("general.file_type"), { type: GgufValueType.UINT32, value: 7 });
    const whole = parseGgufMetadataPrefix(file, file.length, "m.gguf")!;
    assert.equal(whole.complete, true);
    assert.equal(whole.metadata.get("general.name")?.value, "after");
    assert.equal(parseGgufMetadataPrefix(file.subarray(0, 10), file.length), undefined, "no whole preamble: read more");
  });

  it("names the file and field of what is wrong within the prefix", () => {
    const badMagic = Uint8Array.from(file);
    badMagic[0] = 0x58;
    assert.equal(hasGgufMagic(badMagic), false);
    assert.equal(hasGgufMagic(file), true);
    assertInferenceError(() => parseGgufMetadataPrefix(badMagic.subarray(0, 4096), file.length, "m.gguf"), "MODEL_FORMAT", ["m.gguf", "magic"]);
    const oddType = Uint8Array.from(file);
    // general.architecture's value type (after the 24-byte preamble and the 8 + 20 bytes of its key).
    new DataView(oddType.buffer).setUint32(24 + 8 + 20, 99, true);
    assertInferenceError(() => parseGgufMetadataPrefix(oddType, file.length, "m.gguf"), "MODEL_FORMAT", ["m.gguf", 'metadata["general.architecture"]', "99"]);
  });
});

describe("readGgufMetadataPrefix", () => {
  const folder = mkdtemp(join(tmpdir(), "infer-gguf-prefix-"));
  after(async () => rm(await folder, { recursive: true, force: true }));

  it("reads at most the bytes asked for, and at least the preamble", async () => {
    const dir = await folder;
    const path = join(dir, "m.gguf");
    await writeFile(path, file);
    const partial = await readGgufMetadataPrefix(path, 4096);
    assert.equal(partial.complete, false);
    assert.equal(partial.metadata.get("general.architecture")?.value, "llama");
    assert.equal((await readGgufMetadataPrefix(path, 2 ** 20)).complete, true);
    assert.equal((await readGgufMetadataPrefix(path, 1)).metadata.size, 0);
    await assertRejectsWith(() => readGgufMetadataPrefix(join(dir, "absent.gguf"), 4096), "MODEL_NOT_FOUND", ["absent.gguf"]);
    const short = join(dir, "short.gguf");
    await writeFile(short, file.subarray(0, 10));
    await assertRejectsWith(() => readGgufMetadataPrefix(short, 4096), "MODEL_FORMAT", ["short.gguf"]);
  });
});
