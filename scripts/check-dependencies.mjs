#!/usr/bin/env node
// The dependency rules of .dependency-cruiser.mjs (no import cycle between files or folders, no Node
// built-in in portable code) over every package's src and test; part of `npm run lint`.
// It first cruises dependency-fixtures/, a small tree that breaks each rule once and keeps one
// allowed case for some, and fails unless exactly those violations come back: a rule that stops
// firing (an option renamed, a tool upgrade) fails lint instead of passing everything.
import { cruise } from "dependency-cruiser";
import config from "../.dependency-cruiser.mjs";

const root = new URL("..", import.meta.url).pathname;
const options = { ...config.options, ruleSet: { forbidden: config.forbidden }, validate: true };

const EXPECTED = [
  "no-file-cycle: packages/core/src/cycle-a.ts -> packages/core/src/cycle-b.ts",
  "no-folder-cycle: packages/wasm/src/arch -> packages/wasm/src/engine",
  "no-folder-cycle: packages/wasm/src/engine -> packages/wasm/src/arch",
  "portable-imports-no-node: packages/core/src/reads-files.ts -> fs",
  "portable-imports-no-node: packages/wasm/src/kernels/wasm/worker.ts -> worker_threads",
];

const fixture = await cruise(["packages"], { ...options, baseDir: `${root}scripts/dependency-fixtures` });
const found = fixture.output.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
if (JSON.stringify(found) !== JSON.stringify(EXPECTED)) {
  console.error("dependency rules: the fixture's violations changed, so a rule no longer checks what it should.");
  console.error(`expected:\n  ${EXPECTED.join("\n  ")}\nfound:\n  ${found.join("\n  ") || "(none)"}`);
  process.exit(1);
}

const real = await cruise(["packages/*/src", "packages/*/test"], { ...options, baseDir: root, outputType: "err" });
process.stdout.write(real.output);
process.exit(real.exitCode === 0 ? 0 : 1);
