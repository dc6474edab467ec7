#!/usr/bin/env node
// Decode speed through @infer/llama-cpp vs raw node-llama-cpp: same model, same
// threads, same context, greedy, EOS ignored. Runs alternate between the two so
// machine noise hits both alike; medians are compared. Target: overhead <= 3%.
//
//   npm run bench -w @infer/llama-cpp -- [--model file.gguf] [--threads n] [--tokens n] [--runs n]
//
// Needs `npm run build` first (it imports the compiled package).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { loadModel } from "@infer/core";
import "@infer/llama-cpp";
import { getLlama } from "node-llama-cpp";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: fileURLToPath(new URL("../../../../shared/models/stories260K/stories260K.gguf", import.meta.url)) },
    threads: { type: "string", default: "1" },
    tokens: { type: "string", default: "400" },
    runs: { type: "string", default: "7" },
    prompt: { type: "string", default: "Once upon a time" },
  },
});
const modelPath = values.model;
const threads = Number(values.threads);
const tokens = Number(values.tokens);
const runs = Number(values.runs);
if (!existsSync(modelPath)) {
  console.error(`no model at ${modelPath}; pass --model path/to/model.gguf`);
  process.exit(1);
}
const contextLength = 2 ** Math.ceil(Math.log2(tokens + 64));

// Raw: node-llama-cpp's own evaluate loop, nothing else.
const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, maxThreads: 0, progressLogs: false });
const rawModel = await llama.loadModel({ modelPath });
const rawContext = await rawModel.createContext({ contextSize: contextLength, sequences: 1, threads: { ideal: threads, min: threads } });
const rawSequence = rawContext.getSequence();
const promptTokens = [rawModel.tokens.bos, ...rawModel.tokenize(values.prompt, true)].filter((t) => t !== null);

async function rawRun() {
  await rawSequence.clearHistory();
  let count = 0;
  let firstAt = 0;
  for await (const _ of rawSequence.evaluate(promptTokens, { temperature: 0, yieldEogToken: true })) {
    if (++count === 1) firstAt = performance.now();
    if (count === tokens) break;
  }
  return ((count - 1) * 1000) / (performance.now() - firstAt);
}

// Wrapper: the full path an application uses (stream, stop handling, token texts, metrics).
const model = await loadModel(modelPath, { backend: "llama_cpp", threads, contextLength, parallelSlots: 1 });
async function wrapperRun() {
  const result = await model.generateText(values.prompt, { temperature: 0, maxTokens: tokens, ignoreEos: true });
  if (result.tokens.length !== tokens) throw new Error(`wrapper produced ${result.tokens.length} tokens, expected ${tokens}`);
  return result.metrics.decodeTokensPerSec;
}

const median = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

await rawRun();
await wrapperRun(); // warm-up, not counted
const raw = [];
const wrapped = [];
for (let i = 0; i < runs; i++) {
  raw.push(await rawRun());
  wrapped.push(await wrapperRun());
}
const rawMedian = median(raw);
const wrappedMedian = median(wrapped);
const overhead = ((rawMedian - wrappedMedian) / rawMedian) * 100;
console.log(`model ${modelPath}`);
console.log(`threads ${threads}, ${tokens} tokens per run, ${runs} runs each (alternating), context ${contextLength}`);
console.log(`raw node-llama-cpp  median ${rawMedian.toFixed(1)} tok/s  [${raw.map((x) => x.toFixed(0)).join(", ")}]`);
console.log(`@infer/llama-cpp    median ${wrappedMedian.toFixed(1)} tok/s  [${wrapped.map((x) => x.toFixed(0)).join(", ")}]`);
console.log(`wrapper overhead ${overhead.toFixed(2)}% (target <= 3%)`);

await model.close();
await rawContext.dispose();
await rawModel.dispose();
