import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import { runConformanceSuite } from "@infer/core/testing";
import "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

runConformanceSuite({
  name: "llama_cpp stories260K.gguf",
  load: () => loadModel(STORIES_GGUF, TEST_LOAD),
  skip: skipWithoutStories || undefined,
});

/**
 * Random GGUF models come from @infer/wasm's test helpers (the same files its
 * engine is tested on), loaded from its build output: a test-only link, so
 * this package does not depend on @infer/wasm.
 */
const RANDOM_MODELS = new URL("../../../wasm/dist/src/testing/index.js", import.meta.url);
type WriteRandomGguf = (path: string, spec: { architecture: string; seed: number }) => Promise<unknown>;
const randomModelsMissing = existsSync(fileURLToPath(RANDOM_MODELS))
  ? undefined
  : `needs @infer/wasm's random model writer at ${fileURLToPath(RANDOM_MODELS)} (build packages/wasm first)`;

// phi3 is left out: llama.cpp's phi3 vocabulary loader looks up the "<|end|>"
// token by name, which the random models' byte-level vocabulary does not have.
for (const architecture of ["llama", "qwen2", "qwen3", "gemma3"]) {
  runConformanceSuite({
    name: `llama_cpp random ${architecture} GGUF`,
    skip: randomModelsMissing,
    load: async () => {
      const { writeRandomGguf } = (await import(RANDOM_MODELS.href)) as { writeRandomGguf: WriteRandomGguf };
      const path = join(await mkdtemp(join(tmpdir(), "infer-llama-cpp-random-")), `${architecture}.gguf`);
      await writeRandomGguf(path, { architecture, seed: 7 });
      return loadModel(path, { ...TEST_LOAD, contextLength: 128 });
    },
  });
}
