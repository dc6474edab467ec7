#!/usr/bin/env node
// The workload for CPU profiles of the engine (not a test, not a benchmark; docs/performance.md,
// "Running the benchmark"):
//   node --cpu-prof --cpu-prof-dir=/tmp/prof packages/wasm/bench/profile.mjs <model> <threads> <promptTokens> [newTokens]
//   node packages/wasm/bench/profile.mjs --summary /tmp/prof/<file>.cpuprofile [rows]
// The first runs three greedy generations (prefill of promptTokens, then newTokens
// decoded with EOS ignored) and prints each one's prefill and decode rates; the second
// prints the profile's self time per function. kernels.wasm has no name section:
// `wasm-dis` of dist/src/kernels/wasm/kernels.wasm maps wasm-function[i] to its exports.
import { readFileSync } from "node:fs";

if (process.argv[2] === "--summary") {
  const profile = JSON.parse(readFileSync(process.argv[3], "utf8"));
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfTime = new Map();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = nodes.get(id).callFrame;
    const key = `${functionName || "(anonymous)"} ${url.split("/").pop()}:${lineNumber}`;
    const delta = profile.timeDeltas[i] ?? 0;
    selfTime.set(key, (selfTime.get(key) ?? 0) + delta);
    total += delta;
  });
  const rows = [...selfTime].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[4] ?? 25));
  for (const [key, time] of rows) console.log(`${((100 * time) / total).toFixed(1).padStart(5)}%  ${key}`);
} else {
  const [path, threads, promptTokens, newTokens] = process.argv.slice(2);
  if (!path || !(Number(threads) >= 1) || !(Number(promptTokens) >= 1)) {
    console.error("usage: profile.mjs <model> <threads> <promptTokens> [newTokens] | --summary <file.cpuprofile> [rows]");
    process.exit(2);
  }
  const { loadModel } = await import("@infer/core");
  await import("@infer/wasm"); // the package entry, as an application imports it (its bundle: scripts/bundle.mjs)
  const model = await loadModel(path, { backend: "wasm", threads: Number(threads), contextLength: 1024, parallelSlots: 1 });
  const text = "Once upon a time, in a small village by the sea, there lived an old fisherman who told stories. ".repeat(60);
  const prompt = model.decode(model.encode(text).slice(0, Number(promptTokens)));
  for (let run = 0; run < 3; run++) {
    await model.generateText(prompt, { temperature: 0, ignoreEos: true, maxTokens: Number(newTokens ?? 1) });
    const m = model.metrics();
    console.log(`prompt ${m.promptTokens} tokens at ${m.prefillTokensPerSec.toFixed(1)} t/s, decode ${m.decodeTokensPerSec.toFixed(1)} t/s`);
  }
  await model.close();
}
