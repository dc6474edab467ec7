/**
 * "@infer/wasm" as an application imports it is the bundle in dist/bundle
 * (scripts/bundle.mjs), which finds its worker thread and kernel builds beside
 * it: a model run through it in a fresh process, at two threads and on each
 * kernel build, gives the tokens and log-probabilities of the modules tsc compiled.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import { GgmlType } from "@infer/formats";
import "../../src/index.js";
import { KERNELS_ENV } from "../../src/model/backend.js";
import { writeRandomGguf } from "../../src/testing/index.js";

const packageDir = fileURLToPath(new URL("../../../", import.meta.url));
const dir = await mkdtemp(join(tmpdir(), "infer-wasm-bundle-"));
const modelPath = join(dir, "model.gguf");
after(() => rm(dir, { recursive: true, force: true }));
before(async () => {
  // Matrices of 0.3-0.8 MiB, so that every product is split between both threads.
  await writeRandomGguf(modelPath, { architecture: "qwen2", seed: 5, type: GgmlType.Q8_0, hiddenSize: 512, ffnSize: 1536, numLayers: 2 });
});

const PROMPT = "bundled or not";
const OPTIONS = { temperature: 0, maxTokens: 12, ignoreEos: true, logprobs: 5 };

interface Run {
  resolved: string;
  /** Each token's id, text, log-probability and the five likeliest, as JSON carries them. */
  tokens: unknown[];
}

/** Runs the model in a fresh process that imports the packages by name; kernels: INFER_WASM_KERNELS. */
function runThroughPackages(kernels: string, nodeFlags: string[] = []): Run {
  const script = `import { loadModel } from "@infer/core";
import "@infer/wasm";
const model = await loadModel(${JSON.stringify(modelPath)}, { backend: "wasm", threads: 2 });
const result = await model.generateText(${JSON.stringify(PROMPT)}, ${JSON.stringify(OPTIONS)});
await model.close();
console.log(JSON.stringify({ resolved: import.meta.resolve("@infer/wasm"), tokens: result.tokens }));`;
  const out = execFileSync(process.execPath, [...nodeFlags, "--input-type=module", "-e", script], {
    cwd: packageDir,
    encoding: "utf8",
    env: { ...process.env, [KERNELS_ENV]: kernels },
  });
  return JSON.parse(out) as Run;
}

async function runCompiled(kernels: string): Promise<Omit<Run, "resolved">> {
  const saved = process.env[KERNELS_ENV];
  process.env[KERNELS_ENV] = kernels;
  try {
    await using model = await loadModel(modelPath, { backend: "wasm", threads: 2 });
    const result = await model.generateText(PROMPT, OPTIONS);
    return { tokens: JSON.parse(JSON.stringify(result.tokens)) as unknown[] };
  } finally {
    if (saved === undefined) delete process.env[KERNELS_ENV];
    else process.env[KERNELS_ENV] = saved;
  }
}

test("the bundle, on the SIMD128 kernels at two threads, runs as the compiled modules do", async () => {
  const bundled = runThroughPackages("wasm-simd");
  assert.ok(bundled.resolved.endsWith("/packages/wasm/dist/bundle/index.js"), bundled.resolved);
  const compiled = await runCompiled("wasm-simd");
  assert.equal(bundled.tokens.length, OPTIONS.maxTokens);
  assert.deepEqual(bundled.tokens, compiled.tokens);
});

test("the bundle finds its relaxed-SIMD kernel build too", () => {
  // Node 20 runs relaxed SIMD behind a flag; the bundle must find kernels-relaxed.wasm beside it.
  const flag = process.versions.node.startsWith("20.") ? ["--experimental-wasm-relaxed-simd"] : [];
  const relaxed = runThroughPackages("wasm-relaxed-simd", flag);
  const simd = runThroughPackages("wasm-simd");
  assert.equal(relaxed.tokens.length, OPTIONS.maxTokens);
  // The two builds round differently in places; their greedy tokens agree on this model.
  const ids = (run: Run) => run.tokens.map((token) => (token as { id: number }).id);
  assert.deepEqual(ids(relaxed), ids(simd));
});
