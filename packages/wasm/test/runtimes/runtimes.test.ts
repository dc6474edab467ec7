/**
 * Bun and Deno run the engine too (their npm packages `bun` and `deno`, dev
 * dependencies, ship the binaries): the package's own tests for loading,
 * generation and the conformance suite pass under each, and both runtimes give
 * Node's greedy tokens on the shared real models through the built packages,
 * on the kernel build each picks by feature detection and on the baseline build.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { KERNELS_ENV } from "../../src/model/backend.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";
import type { GreedyRun } from "./greedy-entry.js";

const packageDir = fileURLToPath(new URL("../../../", import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../../../../../node_modules/.bin/${name}`, import.meta.url));
const greedyEntry = fileURLToPath(new URL("./greedy-entry.js", import.meta.url));

/** Each runtime's command line for a script and for a test file (Bun's own runner times tests out at 5 s by default). */
const RUNTIMES = {
  bun: { script: [bin("bun"), "run"], test: [bin("bun"), "test", "--timeout", "120000"] },
  // --no-check: these are tsc's JavaScript output; Deno would type-check the .d.ts files beside them by its own rules.
  deno: { script: [bin("deno"), "run", "-A"], test: [bin("deno"), "test", "-A", "--no-check"] },
} as const;
type Runtime = keyof typeof RUNTIMES;

/**
 * The compiled test files run under each runtime: every architecture's loading and logits on random
 * models, and greedy generation plus the conformance suite on the real ones. (model/wasm-model.test.js
 * is left to Node: its runaway chat templates are timed against a CPU budget that Bun's interpreter
 * of them reaches first on a busy machine.)
 */
const TEST_FILES = ["dist/test/engine/random-models.test.js", "dist/test/model/shared-models.test.js"];

/** How each runtime's test runner reports a passed test. */
const PASSED: Record<Runtime, (name: string) => RegExp> = {
  bun: (name) => new RegExp(`\\(pass\\) [^\\n]*${name}`),
  deno: (name) => new RegExp(`${name}[^\\n]* \\.\\.\\. ok`),
};

for (const runtime of Object.keys(RUNTIMES) as Runtime[]) {
  test(`${runtime} passes the wasm package's loading, generation and conformance tests`, { timeout: 600_000 }, () => {
    const [command, ...args] = RUNTIMES[runtime].test;
    assert.ok(existsSync(command), `${command} is missing: npm install brings it (devDependency "${runtime}")`);
    const run = spawnSync(command, [...args, ...TEST_FILES], { cwd: packageDir, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
    const output = `${run.stdout}${run.stderr}`;
    assert.equal(run.status, 0, output.slice(-4000));
    // The tests really ran (a runner that found nothing would exit 0 too).
    assert.match(output, PASSED[runtime]("qwen3: GGUF and HF layouts of the same random weights give the float64 reference's logits"));
    if (!skipWithoutSharedModels()) {
      assert.match(output, PASSED[runtime]("stories260K\\.gguf: greedy 200 tokens from BOS"));
      assert.match(output, PASSED[runtime]("greedy decoding is deterministic"));
    }
  });
}

function greedyRun(command: readonly string[], kernels?: string): GreedyRun {
  const [executable, ...args] = command;
  const env = { ...process.env };
  if (kernels) env[KERNELS_ENV] = kernels;
  else delete env[KERNELS_ENV];
  const out = execFileSync(executable!, [...args, greedyEntry, SHARED_MODELS], { cwd: packageDir, encoding: "utf8", env });
  return JSON.parse(out.trim().split("\n").at(-1)!) as GreedyRun;
}

test("Bun and Deno give Node's greedy tokens on the shared models, on either kernel build", { skip: skipWithoutSharedModels(), timeout: 600_000 }, () => {
  const node = greedyRun([process.execPath]);
  // Node's own texts are the published ones (shared-models.test.ts checks the same against the oracles).
  assert.equal(node.stories.text, readFileSync(`${SHARED_MODELS}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, ""));
  const expectedTiny = JSON.parse(readFileSync(`${SHARED_MODELS}tinystories-656k/expected-greedy-100.json`, "utf8")) as { greedy_ids: number[] };
  assert.deepEqual(node.tinyStories.ids, expectedTiny.greedy_ids);
  // Node 20 has relaxed SIMD only behind a V8 flag: detection picks the baseline build without it, the relaxed one with it.
  if (process.versions.node.startsWith("20.")) {
    assert.equal(node.relaxedSimd, false);
    const relaxed = greedyRun([process.execPath, "--experimental-wasm-relaxed-simd"]);
    assert.equal(relaxed.relaxedSimd, true);
    assert.deepEqual([relaxed.stories, relaxed.tinyStories], [node.stories, node.tinyStories], "node (relaxed kernels)");
  }
  for (const runtime of Object.keys(RUNTIMES) as Runtime[]) {
    const picked = greedyRun(RUNTIMES[runtime].script);
    // Both ship a V8 or JavaScriptCore with relaxed SIMD on by default, so detection picks the relaxed build.
    assert.equal(picked.relaxedSimd, true, `${runtime} did not detect relaxed SIMD`);
    const baseline = greedyRun(RUNTIMES[runtime].script, "wasm-simd");
    for (const [build, run] of [["relaxed", picked], ["baseline", baseline]] as const) {
      assert.deepEqual(run.stories, node.stories, `${runtime} (${build} kernels): stories260K`);
      assert.deepEqual(run.tinyStories, node.tinyStories, `${runtime} (${build} kernels): TinyStories-656K`);
    }
  }
});
