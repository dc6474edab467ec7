import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

// The suite must fail for broken backends, or passing it would prove nothing.
const fixture = fileURLToPath(new URL("./fixtures/broken-conformance.js", import.meta.url));

/** Runs the suite on one broken model; resolves the titles of the failing tests. */
function failingTests(variant: string): Promise<string[]> {
  // Without NODE_TEST_CONTEXT the child reports TAP on stdout instead of to this runner.
  const { NODE_TEST_CONTEXT: _context, ...env } = process.env;
  return new Promise((resolve) => {
    // The child exits non-zero (its tests fail on purpose); only its report matters.
    execFile(
      process.execPath,
      ["--test", "--test-reporter=tap", fixture],
      { env: { ...env, INFER_BROKEN: variant }, encoding: "utf8" },
      (_error, stdout) => resolve([...stdout.matchAll(/^ {4}not ok \d+ - (.*)$/gm)].map((m) => m[1]!.trim())),
    );
  });
}

const expectations: [variant: string, failing: string][] = [
  ["ignores-seed", "a seed fixes sampling; different seeds give different samples"],
  ["wrong-classify", "classify picks generate's first greedy token; logits cover the vocabulary"],
  ["shuffled-batch", "batchGenerate equals one generateText per prompt"],
  ["no-metrics", "metrics describe the last call"],
  ["decode-disagrees", "streamed text equals decode(ids) for tokenizer models"],
];

// Started together: each child is mostly process start-up.
const runs = new Map(expectations.map(([variant]) => [variant, failingTests(variant)]));

for (const [variant, failing] of expectations) {
  it(`the suite catches a broken model: ${variant}`, async () => {
    const failures = await runs.get(variant)!;
    assert.ok(failures.includes(failing), `expected '${failing}' to fail; failures: ${JSON.stringify(failures)}`);
    assert.ok(!failures.includes("greedy generation produces text"), "unrelated checks failed too");
  });
}
