#!/usr/bin/env node
// Runs every compiled test file (packages/*/dist/test/**/*.test.js) with node's test runner.
// Node 20's runner takes no globs, so the files are listed here. Pass package names to narrow:
//   node scripts/test.mjs core wasm
// (`fuzz` names scripts/fuzz/test.)
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const only = process.argv.slice(2);

function collect(dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith(".test.js")) out.push(path);
  }
  return out;
}

const files = [];
for (const pkg of readdirSync(join(root, "packages")).sort()) {
  if (only.length && !only.includes(pkg)) continue;
  const dir = join(root, "packages", pkg, "dist", "test");
  if (existsSync(dir)) collect(dir, files);
}
// The fuzzer's own tests (a fixed-seed campaign, the reproducers' replay) live beside it.
const fuzzTests = join(root, "scripts", "fuzz", "test");
if ((!only.length || only.includes("fuzz")) && existsSync(fuzzTests)) {
  for (const name of readdirSync(fuzzTests).sort()) if (name.endsWith(".test.mjs")) files.push(join(fuzzTests, name));
}
if (files.length === 0) {
  console.error("no test files found: run `npm run build` first");
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const result = spawnSync(process.execPath, ["--test", `--test-concurrency=${concurrency}`, ...files], {
  stdio: "inherit",
  cwd: root,
});
process.exit(result.status ?? 1);
