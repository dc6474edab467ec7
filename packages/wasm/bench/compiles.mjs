#!/usr/bin/env node
// What V8 still compiles after load (not a test; docs/performance.md, "Cold decode"):
//   node packages/wasm/bench/compiles.mjs <model> <threads> [--no-warm-up]
// Runs itself under `node --trace-opt`: loads the model (with its warm-up at load
// unless --no-warm-up), then three greedy generations of 128 tokens after a short
// prompt, and prints how many functions V8's optimizing compiler finished in each
// phase and their compile time. A first generation that compiles about as little as
// the later ones runs on optimized code from its first token; the count does not
// depend on how busy the machine is, where the decode rates do.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const [modelPath, threadsArg, ...flags] = process.argv.slice(2);
if (!modelPath || !(Number(threadsArg) >= 1)) {
  console.error("usage: node compiles.mjs <model> <threads> [--no-warm-up]");
  process.exit(2);
}
const PHASE = "phase:";

if (process.env.INFER_COMPILES_CHILD) {
  const { loadWasmModel } = await import("@infer/wasm");
  console.log(`${PHASE} load`);
  const model = await loadWasmModel(modelPath, { threads: Number(threadsArg), contextLength: 1024, parallelSlots: 1, warmUp: !flags.includes("--no-warm-up") });
  for (const generation of ["first", "second", "third"]) {
    console.log(`${PHASE} ${generation} generation`);
    await model.generateText("Once upon a time, in a small village by the sea, there", { temperature: 0, ignoreEos: true, maxTokens: 128 });
  }
  await model.close();
} else {
  const root = fileURLToPath(new URL("../../../", import.meta.url));
  const script = fileURLToPath(import.meta.url);
  const run = spawnSync(process.execPath, ["--trace-opt", script, ...process.argv.slice(2)], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 256 * 2 ** 20,
    env: { ...process.env, INFER_COMPILES_CHILD: "1" },
  });
  if (run.status !== 0) {
    console.error(run.stderr);
    process.exit(run.status ?? 1);
  }
  const phases = [];
  for (const line of run.stdout.split("\n")) {
    if (line.startsWith(PHASE)) phases.push({ name: line.slice(PHASE.length).trim(), compiles: 0, ms: 0 });
    // "[completed compiling <JSFunction f ...> (target TURBOFAN) - took 0.1, 2.3, 0.1 ms]": the three phases of one compile.
    const took = /completed compiling .* took ([\d.]+), ([\d.]+), ([\d.]+) ms/.exec(line);
    if (took && phases.length > 0) {
      phases.at(-1).compiles++;
      phases.at(-1).ms += Number(took[1]) + Number(took[2]) + Number(took[3]);
    }
  }
  for (const { name, compiles, ms } of phases) console.log(`${name.padEnd(18)} ${String(compiles).padStart(4)} compiles ${ms.toFixed(0).padStart(6)} ms`);
}
