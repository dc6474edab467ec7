import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isTokenizerModel, loadModel } from "@infer/core";
import { seededRandom } from "@infer/core/testing";
import "../src/index.js";
import { TEST_LOAD } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing, type WasmKit } from "./wasm-link.js";

/**
 * The bench models' synthetic words (syntheticVocab in @infer/wasm's testing
 * module) must re-encode to the ids generated, in both backends, or a chat
 * bench re-evaluates every reply and measures the vocabulary, not the cache.
 */
const BASE_TOKENS = 266; // byteVocab: 256 bytes, 8 merges, BOS, EOS
// Past every word of one, two and three letters (19 + 361 + 6859), into those of four.
const VOCAB_SIZE = BASE_TOKENS + 1 + 19 + 361 + 6859 + 200;

describe("synthetic bench vocabulary", { skip: wasmBuildMissing ?? false }, () => {
  let kit: WasmKit;
  let dir: string;
  let path: string;
  before(async () => {
    kit = await loadWasmKit();
    dir = await mkdtemp(join(tmpdir(), "infer-synthetic-vocab-"));
    path = join(dir, "synthetic.gguf");
    await kit.writeRandomGguf(path, { architecture: "llama", seed: 3, vocabSize: VOCAB_SIZE });
  });
  after(() => rm(dir, { recursive: true, force: true }));

  for (const backend of ["wasm", "llama_cpp"]) {
    it(`${backend}: decoded synthetic ids encode back to the same ids`, async () => {
      await using model = await loadModel(path, { ...TEST_LOAD, backend });
      assert.ok(isTokenizerModel(model));
      const random = seededRandom(11);
      for (let run = 0; run < 20; run++) {
        const ids = Array.from({ length: 1 + run * 3 }, () => BASE_TOKENS + Math.floor(random() * (VOCAB_SIZE - BASE_TOKENS)));
        const text = model.decode(ids);
        assert.match(text, /^( w[a-z]*)+$/, "words of a space, w and letters");
        assert.deepEqual(model.encode(text), ids, text);
      }
    });
  }
});
