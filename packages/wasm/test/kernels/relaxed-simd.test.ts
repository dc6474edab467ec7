// The relaxed-SIMD build of the kernels on a runtime that needs a V8 flag for
// it (Node 20): matmul.test.ts runs again in a child process with
// --experimental-wasm-relaxed-simd, where it adds the relaxed build to every
// case. Where relaxed SIMD is on without a flag, matmul.test.ts covers it in
// this process already.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { relaxedSimdSupported } from "../../src/kernels/wasm/index.js";

const FLAG = "--experimental-wasm-relaxed-simd";

test("the relaxed-SIMD kernels match the reference and the baseline's bits (matmul.test.js under the V8 flag)", { timeout: 300_000 }, (t) => {
  if (relaxedSimdSupported()) {
    t.diagnostic("this runtime has relaxed SIMD without a flag: matmul.test.js ran its relaxed cases in this process");
    return;
  }
  const probe = spawnSync(process.execPath, [FLAG, "--input-type=module", "-e", "import { relaxedSimdSupported } from " + JSON.stringify(new URL("../../src/kernels/wasm/index.js", import.meta.url).href) + "; process.stdout.write(String(relaxedSimdSupported()))"], { encoding: "utf8" });
  assert.equal(probe.status, 0, probe.stderr);
  assert.equal(probe.stdout, "true", `${FLAG} did not turn relaxed SIMD on`);
  const file = fileURLToPath(new URL("./matmul.test.js", import.meta.url));
  // Without NODE_TEST_CONTEXT (set for this file by the runner) the child reports in plain TAP, not to our runner.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const run = spawnSync(process.execPath, [FLAG, "--test", "--test-reporter=tap", file], { encoding: "utf8", env, maxBuffer: 64 * 1024 * 1024 });
  assert.equal(run.status, 0, `matmul.test.js under ${FLAG} failed:\n${run.stdout.slice(-4000)}\n${run.stderr.slice(-2000)}`);
  // The relaxed build really ran: its cases are named, and all passed.
  for (const threads of [1, 2, 3, 4]) assert.match(run.stdout, new RegExp(`ok \\d+ - wasm matmul \\(relaxed SIMD\\), ${threads} thread`));
  assert.match(run.stdout, /# fail 0/);
});
