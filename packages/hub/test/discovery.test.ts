import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { writeGguf } from "@infer/formats";
import { discover, discoverModels } from "../src/index.js";

const root = mkdtempSync(join(tmpdir(), "infer-discovery-"));
after(() => {
  chmodSync(join(root, "locked"), 0o755);
  rmSync(root, { recursive: true, force: true });
});

function write(path: string, content: string | Buffer): string {
  const full = join(root, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, content);
  return full;
}
const json = (value: unknown) => JSON.stringify(value);

/** A GGUF file of metadata only: a string array first when asked (a vocabulary), then the architecture and file type. */
function ggufHeader(fixture: { architecture?: string; fileType?: number; leadingStrings?: string[] }): Buffer {
  const metadata = {
    ...(fixture.leadingStrings && { "tokenizer.ggml.tokens": fixture.leadingStrings }),
    ...(fixture.architecture !== undefined && { "general.architecture": fixture.architecture }),
    ...(fixture.fileType !== undefined && { "general.file_type": fixture.fileType }),
  };
  return Buffer.from(writeGguf({ metadata, tensors: [] }));
}

write("hf-llama/config.json", json({ model_type: "llama" }));
write("hf-llama/model.safetensors", Buffer.alloc(100));
write("hf-llama/tokenizer.json", "{}");
write("hf-llama/extra.gguf", ggufHeader({ architecture: "llama", fileType: 7 }));
write("hf-sharded/config.json", json({ model_type: "qwen2", quantization_config: { quant_method: "gptq", bits: 4 } }));
write("hf-sharded/model-00001-of-00002.safetensors", Buffer.alloc(10));
write("hf-sharded/model-00002-of-00002.safetensors", Buffer.alloc(20));
write("hf-bits/config.json", json({ model_type: "mistral", quantization: { bits: 8 } }));
write("hf-bits/w.safetensors", Buffer.alloc(1));
write("hf-untyped/config.json", json({ hidden_size: 4 }));
write("hf-untyped/w.safetensors", Buffer.alloc(2));
write("bad-json/config.json", "{not json");
write("bad-json/model.safetensors", Buffer.alloc(5));
write("json-array/config.json", "[1, 2]");
write("json-array/model.safetensors", Buffer.alloc(5));
write("config-only/config.json", json({ model_type: "llama" }));
const q4 = ggufHeader({ architecture: "llama", fileType: 15 });
write("ggufs/a.gguf", q4);
write("ggufs/B.GGUF", ggufHeader({ architecture: "qwen3", fileType: 1 }));
write("ggufs/no-file-type.gguf", ggufHeader({ architecture: "phi3" }));
write("ggufs/odd-file-type.gguf", ggufHeader({ architecture: "gemma3", fileType: 99 }));
// A 1.5 MB vocabulary before the architecture key: past discovery's bounded read.
const bigVocab = Array.from({ length: 150_000 }, (_, i) => `token-${i}`);
write("ggufs/big-vocab.gguf", ggufHeader({ leadingStrings: bigVocab, architecture: "llama", fileType: 0 }));
write("ggufs/wrong-magic.gguf", Buffer.concat([Buffer.from("GGML"), q4.subarray(4)]));
write("ggufs/truncated.gguf", q4.subarray(0, 10));
write("ggufs/readme.txt", "not a model");
write(".hidden/x.gguf", q4);
write("node_modules/pkg/x.gguf", q4);
write("nested/deep/deeper/c.gguf", ggufHeader({ architecture: "llama", fileType: 2 }));
// A Hugging Face cache: snapshot files are links to blobs.
write("hfcache/blobs/1a2b", json({ model_type: "qwen3" }));
write("hfcache/blobs/3c4d", Buffer.alloc(64));
mkdirSync(join(root, "hfcache/snapshots/rev1"), { recursive: true });
symlinkSync("../../blobs/1a2b", join(root, "hfcache/snapshots/rev1/config.json"));
symlinkSync("../../blobs/3c4d", join(root, "hfcache/snapshots/rev1/model.safetensors"));
mkdirSync(join(root, "links"));
symlinkSync("../ggufs/a.gguf", join(root, "links/linked.gguf"));
symlinkSync("../nowhere.gguf", join(root, "links/dangling.gguf"));
symlinkSync("..", join(root, "links/loop")); // a folder link back up: not followed
write("locked/d.gguf", q4);
chmodSync(join(root, "locked"), 0o000);
// Running as root, chmod 000 does not stop reads; otherwise the folder is unreadable and skipped.
const canReadLocked = (() => {
  try {
    return existsSync(join(root, "locked", "d.gguf"));
  } catch {
    return false;
  }
})();

describe("discoverModels", () => {
  it("finds HF folders and GGUF files with type, quantization, files and bytes, sorted by path", async () => {
    const found = await discoverModels(root);
    const expected = [
      { path: join(root, "ggufs/B.GGUF"), format: "gguf", modelType: "qwen3", quantization: "F16", fileCount: 1 },
      { path: join(root, "ggufs/a.gguf"), format: "gguf", modelType: "llama", quantization: "Q4_K_M", fileCount: 1 },
      { path: join(root, "ggufs/big-vocab.gguf"), format: "gguf", modelType: "unknown", quantization: undefined, fileCount: 1 },
      { path: join(root, "ggufs/no-file-type.gguf"), format: "gguf", modelType: "phi3", quantization: undefined, fileCount: 1 },
      { path: join(root, "ggufs/odd-file-type.gguf"), format: "gguf", modelType: "gemma3", quantization: "type 99", fileCount: 1 },
      { path: join(root, "hf-bits"), format: "safetensors", modelType: "mistral", quantization: "8bit", fileCount: 1 },
      { path: join(root, "hf-llama"), format: "safetensors", modelType: "llama", quantization: undefined, fileCount: 1 },
      { path: join(root, "hf-llama/extra.gguf"), format: "gguf", modelType: "llama", quantization: "Q8_0", fileCount: 1 },
      { path: join(root, "hf-sharded"), format: "safetensors", modelType: "qwen2", quantization: "gptq-4bit", fileCount: 2 },
      { path: join(root, "hf-untyped"), format: "safetensors", modelType: "unknown", quantization: undefined, fileCount: 1 },
      { path: join(root, "hfcache/snapshots/rev1"), format: "safetensors", modelType: "qwen3", quantization: undefined, fileCount: 1 },
      { path: join(root, "links/linked.gguf"), format: "gguf", modelType: "llama", quantization: "Q4_K_M", fileCount: 1 },
      ...(canReadLocked
        ? [{ path: join(root, "locked/d.gguf"), format: "gguf", modelType: "llama", quantization: "Q4_K_M", fileCount: 1 }]
        : []),
      { path: join(root, "nested/deep/deeper/c.gguf"), format: "gguf", modelType: "llama", quantization: "Q4_0", fileCount: 1 },
    ];
    assert.deepEqual(
      found.map(({ bytes: _bytes, ...rest }) => rest),
      expected,
    );
    const bytes = Object.fromEntries(found.map((m) => [m.path.slice(root.length + 1), m.bytes]));
    assert.equal(bytes["hf-llama"], 100);
    assert.equal(bytes["hf-sharded"], 30);
    assert.equal(bytes["hfcache/snapshots/rev1"], 64, "a linked shard counts its target's bytes");
    assert.equal(bytes["ggufs/a.gguf"], q4.length);
    assert.ok(bytes["ggufs/big-vocab.gguf"]! > 1 << 20);
  });

  it("the generator yields the same models", async () => {
    const streamed = [];
    for await (const model of discover(root)) streamed.push(model);
    assert.deepEqual(
      streamed.map((m) => m.path).sort(),
      (await discoverModels(root)).map((m) => m.path).sort(),
    );
  });

  it("missing folders and files yield nothing", async () => {
    assert.deepEqual(await discoverModels(join(root, "does-not-exist")), []);
    assert.deepEqual(await discoverModels(join(root, "ggufs/a.gguf")), []);
    assert.deepEqual(await discoverModels(join(root, "config-only")), []);
  });
});

// Real models, when this workplace has them (resolved from dist/test to the repo's sibling `shared`).
const shared = fileURLToPath(new URL("../../../../../shared/models", import.meta.url));
describe("discovery of the shared test models", { skip: existsSync(shared) ? false : `no ${shared}` }, () => {
  it("finds stories260K (GGUF) and tinystories-656k (HF) as llama models", async () => {
    const found = await discoverModels(shared);
    const gguf = found.find((m) => m.path.endsWith("stories260K.gguf"));
    assert.ok(gguf, "stories260K.gguf not found");
    assert.equal(gguf.modelType, "llama");
    assert.ok(gguf.quantization === undefined || gguf.quantization === "F32", String(gguf.quantization));
    const hf = found.find((m) => m.path.endsWith("tinystories-656k"));
    assert.ok(hf, "tinystories-656k not found");
    assert.equal(hf.format, "safetensors");
    assert.equal(hf.modelType, "llama");
    assert.equal(hf.fileCount, 1);
  });
});
