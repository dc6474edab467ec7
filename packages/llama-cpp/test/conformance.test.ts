import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import { runConformanceSuite } from "@infer/core/testing";
import { llamaCppBackend } from "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

/** stories260K has no chat template; a plain one lets the suite's chat check run. */
const STORY_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";

runConformanceSuite({
  name: "llama_cpp stories260K.gguf",
  load: () => loadModel(STORIES_GGUF, TEST_LOAD),
  backend: llamaCppBackend,
  skip: skipWithoutStories || undefined,
  chatMessages: [{ role: "user", content: "Once upon a time" }],
  chatTemplate: STORY_TEMPLATE,
});

// The same model in a child process of its own (LoadOptions.isolate): every call crosses the IPC channel.
runConformanceSuite({
  name: "llama_cpp stories260K.gguf, isolated",
  load: () => loadModel(STORIES_GGUF, { ...TEST_LOAD, isolate: true }),
  backend: llamaCppBackend,
  skip: skipWithoutStories || undefined,
  chatMessages: [{ role: "user", content: "Once upon a time" }],
  chatTemplate: STORY_TEMPLATE,
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

// Left out: phi3, because llama.cpp's phi3 vocabulary loader looks up the
// "<|end|>" token by name, which the random byte-level vocabulary lacks; and
// gemma3, whose random weights give near one-hot next-token distributions
// (entropy ~1e-5 nats for every seed tried), so the suite's "different seeds
// sample differently" check cannot hold for any sampler.
const CHATML =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

for (const architecture of ["llama", "qwen2", "qwen3"]) {
  runConformanceSuite({
    name: `llama_cpp random ${architecture} GGUF`,
    skip: randomModelsMissing,
    backend: llamaCppBackend,
    load: async () => {
      const { writeRandomGguf } = (await import(RANDOM_MODELS.href)) as { writeRandomGguf: WriteRandomGguf };
      const path = join(await mkdtemp(join(tmpdir(), "infer-llama-cpp-random-")), `${architecture}.gguf`);
      await writeRandomGguf(path, { architecture, seed: 7 });
      return loadModel(path, { ...TEST_LOAD, contextLength: 128 });
    },
    chatMessages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hello" },
    ],
    chatTemplate: CHATML,
  });
}
