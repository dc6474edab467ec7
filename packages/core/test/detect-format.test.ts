import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { detectFormat, isGgufFile, isHfFolder } from "../src/node/index.js";
import { ggufHeader } from "./gguf-fixture.js";

const root = mkdtempSync(join(tmpdir(), "infer-detect-format-"));
after(() => rmSync(root, { recursive: true, force: true }));

function write(path: string, content: string | Buffer): string {
  const full = join(root, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, content);
  return full;
}

write("hf-llama/config.json", JSON.stringify({ model_type: "llama" }));
write("hf-llama/model.safetensors", Buffer.alloc(100));
write("hf-sharded/config.json", JSON.stringify({ model_type: "qwen2" }));
write("hf-sharded/model-00001-of-00002.safetensors", Buffer.alloc(10));
write("hf-sharded/model-00002-of-00002.safetensors", Buffer.alloc(20));
write("config-only/config.json", JSON.stringify({ model_type: "llama" }));
const q4 = ggufHeader({ architecture: "llama", fileType: 15 });
write("ggufs/a.gguf", q4);
write("ggufs/B.GGUF", ggufHeader({ architecture: "qwen3", fileType: 1 }));
write("ggufs/wrong-magic.gguf", Buffer.concat([Buffer.from("GGML"), q4.subarray(4)]));
write("ggufs/readme.txt", "not a model");

describe("detectFormat", () => {
  it("reads GGUF magic, HF folder layout and llama2.c extensions", async () => {
    assert.equal(await detectFormat(join(root, "ggufs/a.gguf")), "gguf");
    assert.equal(await detectFormat(join(root, "ggufs/wrong-magic.gguf")), "unknown");
    assert.equal(await detectFormat(join(root, "hf-sharded")), "safetensors");
    assert.equal(await detectFormat(join(root, "config-only")), "unknown");
    assert.equal(await detectFormat(join(root, "hf-llama/model.safetensors")), "safetensors");
    assert.equal(await detectFormat(write("checkpoint.bin", Buffer.alloc(8))), "llama2c");
    assert.equal(await detectFormat(join(root, "ggufs/readme.txt")), "unknown");
    assert.equal(await detectFormat(join(root, "missing")), "unknown");
    assert.equal(await isGgufFile(join(root, "ggufs/B.GGUF")), true);
    assert.equal(await isGgufFile(join(root, "hf-llama")), false);
    assert.equal(await isHfFolder(join(root, "hf-llama")), true);
    assert.equal(await isHfFolder(join(root, "config-only")), false);
    assert.equal(await isHfFolder(join(root, "ggufs")), false);
  });
});
