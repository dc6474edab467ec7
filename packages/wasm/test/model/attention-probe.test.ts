/**
 * `inspectAttention`: the keys a prompt leaves in the KV cache. Position 0 has
 * no rotation, so layer 0's key there is W_k · rmsnorm(embedding(BOS)), which
 * this test computes straight from the file's tensors.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { capabilitiesOf, isAttentionInspector, loadModel } from "@infer/core";
import "@infer/core/node";
import { dequantize, GgmlType } from "@infer/formats";
import { readGguf } from "@infer/formats/node";
import "../../src/index.js";
import { writeRandomGguf } from "../../src/testing/index.js";

const dir = await mkdtemp(join(tmpdir(), "infer-attention-"));
after(() => rm(dir, { recursive: true, force: true }));

test("inspectAttention returns the cached keys per layer and KV head", async () => {
  const path = join(dir, "llama.gguf");
  const dims = await writeRandomGguf(path, { architecture: "llama", seed: 4, type: GgmlType.F32 });
  await using model = await loadModel(path, { backend: "wasm" });
  assert.ok(isAttentionInspector(model));
  assert.equal(capabilitiesOf(model)["probe.attention"], "supported");

  const short = await model.inspectAttention("ab");
  const long = await model.inspectAttention("abcdef");
  assert.equal(short.numLayers, dims.numLayers);
  assert.equal(short.numKVHeads, dims.numKVHeads);
  assert.equal(short.numQueryHeads, dims.numHeads);
  assert.equal(short.headDim, dims.headDim);
  assert.ok(long.seqLen > short.seqLen);
  assert.equal(short.keys.length, dims.numLayers);
  assert.equal(short.keys[0]!.length, dims.numKVHeads);
  assert.equal(short.keys[0]![0]!.length, short.seqLen * dims.headDim);
  // Causal: a longer prompt with the same start leaves the same keys there.
  for (let layer = 0; layer < dims.numLayers; layer++) {
    for (let head = 0; head < dims.numKVHeads; head++) {
      const a = short.keys[layer]![head]!;
      const b = long.keys[layer]![head]!.subarray(0, a.length);
      for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) < 1e-5, `layer ${layer} head ${head} [${i}]`);
    }
  }

  // Layer 0, position 0 (BOS, rotation angle 0): W_k · rmsnorm(embedding(BOS)).
  const gguf = await readGguf(path);
  const tensor = (name: string) => {
    const info = gguf.tensors.find((t) => t.name === name)!;
    return dequantize(info.type, gguf.tensorData(info), info.shape.reduce((a, b) => a * b, 1));
  };
  const hidden = dims.hiddenSize;
  const bos = (model as unknown as { encode(text: string): number[] }).encode("ab")[0]!;
  const embedding = tensor("token_embd.weight").subarray(bos * hidden, (bos + 1) * hidden);
  const norm = tensor("blk.0.attn_norm.weight");
  const wk = tensor("blk.0.attn_k.weight"); // [kvDim, hidden]
  let meanSquare = 0;
  for (const v of embedding) meanSquare += v * v;
  const scale = 1 / Math.sqrt(meanSquare / hidden + dims.rmsEps);
  const kvDim = dims.numKVHeads * dims.headDim;
  for (let r = 0; r < kvDim; r++) {
    let sum = 0;
    for (let c = 0; c < hidden; c++) sum += wk[r * hidden + c]! * embedding[c]! * scale * norm[c]!;
    const head = Math.floor(r / dims.headDim);
    const got = short.keys[0]![head]![r % dims.headDim]!;
    assert.ok(Math.abs(got - sum) < 1e-4 * (1 + Math.abs(sum)), `key row ${r}: ${got} vs ${sum}`);
  }
});
