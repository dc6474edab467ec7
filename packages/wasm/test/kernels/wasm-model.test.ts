// End to end: the real stories260K model (all F32) decoded greedily through
// the WebAssembly kernels (matmul, and attention on the engine's own cache
// arrays, staged) gives llama2.c's published 200-token text, as the reference
// kernels do (see test/engine/real-models.test.ts).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { getStringArray } from "@infer/formats";
import { loadTransformer } from "../../src/load/load.js";
import { createWasmKernels } from "../../src/kernels/wasm/index.js";
import { argmax, SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";

test("stories260K.gguf through the wasm kernels (2 threads): greedy 200 tokens equal the published text", { skip: skipWithoutSharedModels() }, async () => {
  const folder = join(SHARED_MODELS, "stories260K");
  const kernels = await createWasmKernels({ threads: 2, minBytesPerThread: 0 });
  try {
    const { transformer, metadata } = await loadTransformer(join(folder, "stories260K.gguf"), { kernels });
    assert.ok(metadata.format === "gguf");
    const vocab = getStringArray(metadata.gguf.metadata, "tokenizer.ggml.tokens", true).toArray();

    const cache = transformer.createCache(1, 256);
    const ids: number[] = [];
    let token = 1; // BOS
    for (let position = 0; ids.length < 200; position++) {
      const logits = transformer.forward(
        { tokens: Int32Array.of(token), positions: Int32Array.of(position), seqIds: Int32Array.of(0), logitRows: Int32Array.of(0) },
        cache,
      );
      token = argmax(logits);
      ids.push(token);
    }
    // SentencePiece pieces: ▁ is a space, <0xNN> a byte; the first piece's leading space is dropped.
    const bytes: number[] = [];
    for (const id of ids) {
      const piece = vocab[id]!;
      const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
      if (byte) bytes.push(parseInt(byte[1]!, 16));
      else bytes.push(...new TextEncoder().encode(piece.replaceAll("▁", " ")));
    }
    const text = new TextDecoder().decode(Uint8Array.from(bytes)).replace(/^ /, "");
    const expected = (await readFile(join(folder, "expected-greedy-200.txt"), "utf8")).replace(/\n$/, "");
    assert.equal(text, expected);
  } finally {
    await kernels.dispose?.();
  }
});
