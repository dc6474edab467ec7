// One measurement run in a fresh process (so peak RSS is this engine's alone):
//   node measure.mjs <ours|ours-relaxed|ours-no-warm-up|llama> <model.gguf|folder> <threads>
// prints one JSON line: load time, time to first token and prefill rate for a
// 128-token prompt, prefill rate for a 512-token prompt, decode rate over 128
// new tokens (EOS ignored, greedy), and the process's peak RSS.
//
// The first thing after load (which ends with our warm-up generation, except
// for ours-no-warm-up) is the decode run itself, reported as the cold
// decode rate; it is also the warm-up: ours runs JavaScript around its
// kernels, and V8 compiles the hot parts of it with its optimizing compiler on
// background threads during the first ~100 tokens, which on two vCPUs take
// turns with the kernel threads (the first 16 tokens of SmolLM2 Q4_0 at 2 threads
// ran at ~0.6 x the later rate). The prefill figures and the decode rate are
// then measured warm, the way a server runs; both engines get the same runs.
import { performance } from "node:perf_hooks";

const [engine, modelPath, threadsArg, batchSizeArg] = process.argv.slice(2);
const threads = Number(threadsArg);
/** Most prompt tokens per forward pass; undefined: each engine's default (ours 128, llama.cpp 512). */
const batchSize = batchSizeArg === undefined ? undefined : Number(batchSizeArg);
if (!["ours", "ours-relaxed", "ours-no-warm-up", "llama"].includes(engine) || !modelPath || !(threads >= 1)) {
  console.error("usage: node measure.mjs <ours|ours-relaxed|ours-no-warm-up|llama> <model> <threads> [batch size]");
  process.exit(2);
}

/** Both engines get the same context: room for the longest prompt plus the decoded tokens. */
const CONTEXT = 1024;
const PROMPT_SIZES = [128, 512];
const DECODE_PROMPT = 16;
const DECODE_TOKENS = 128;
const TEXT =
  "Once upon a time, in a small village by the sea, there lived an old fisherman who told stories to the children " +
  "every evening. The stories were about ships, storms, far islands and the strange fish that lived in the deep. ";

/**
 * A prompt of exactly `count` tokens for `encode` when one exists nearby: the
 * repeated story text cut to the character length whose encoding comes closest.
 */
function promptOf(count, encode) {
  const long = TEXT.repeat(Math.ceil((count * 8) / TEXT.length) + 1);
  let low = 1;
  let high = long.length;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (encode(long.slice(0, middle)) < count) low = middle + 1;
    else high = middle;
  }
  return long.slice(0, low);
}

function peakRss() {
  return process.resourceUsage().maxRSS * 1024;
}

async function measureOurs() {
  const { loadModel: coreLoad } = await import("@infer/core");
  const { loadWasmModel } = await import("@infer/wasm"); // the package entry, as an application imports it (its bundle: scripts/bundle.mjs)
  // Core's loadModel takes only the contract's options; the warm-up switch is the backend's own.
  const loadModel = engine === "ours-no-warm-up" ? (path, options) => loadWasmModel(path, { ...options, warmUp: false }) : coreLoad;
  const started = performance.now();
  // The last call's memory event: its weights and KV cache are what peak RSS is measured against.
  let memory;
  const probe = { kinds: ["memory"], emit: (event) => (memory = event.payload) };
  const model = await loadModel(modelPath, { backend: "wasm", threads, contextLength: CONTEXT, parallelSlots: 1, batchSize, probe });
  const loadMs = performance.now() - started;
  const encode = (text) => model.encode(text).length;
  const greedy = { temperature: 0, ignoreEos: true };
  const decode = async () => {
    await model.generateText(promptOf(DECODE_PROMPT, encode), { ...greedy, maxTokens: DECODE_TOKENS + 1 });
    const metrics = model.metrics();
    return { tokens: metrics.generatedTokens - 1, tokensPerSec: metrics.decodeTokensPerSec };
  };
  const coldDecode = await decode(); // and the warm-up
  // ours-relaxed: the relaxed-SIMD kernels (bench.mjs sets INFER_WASM_KERNELS and the V8 flag for it).
  const name = { "ours-relaxed": "ours relaxed", "ours-no-warm-up": "ours no warm-up" }[engine] ?? "ours";
  const result = { engine: `${name} (${threads} thread${threads > 1 ? "s" : ""})`, threads, loadMs, coldDecode, prefill: {} };
  for (const size of PROMPT_SIZES) {
    const started = performance.now();
    await model.generateText(promptOf(size, encode), { ...greedy, maxTokens: 1 });
    const wallMs = performance.now() - started;
    const metrics = model.metrics();
    result.prefill[size] = { tokens: metrics.promptTokens, tokensPerSec: metrics.prefillTokensPerSec, ttftMs: wallMs };
  }
  result.decode = await decode();
  result.ttftMs = result.prefill[128].ttftMs;
  result.peakRssBytes = peakRss();
  // Weights as held plus the KV cache (activeMemoryBytes also counts the engine's scratch).
  result.modelBytes = memory.weightBytes + memory.kvCacheBytes;
  await model.close();
  return result;
}

async function measureLlama() {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: 0,
    logLevel: LlamaLogLevel.error,
  });
  const started = performance.now();
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  const context = await model.createContext({ contextSize: CONTEXT, sequences: 1, threads, batchSize: batchSize ?? 512 });
  const sequence = context.getSequence();
  const loadMs = performance.now() - started;
  const encode = (text) => model.tokenize(text, false).length;
  const tokensOf = (text) => model.tokenize(text, false);
  /** Evaluates a prompt and `count` tokens greedily; returns the time to the first and the time between first and last. */
  async function run(tokens, count) {
    await sequence.clearHistory();
    const started = performance.now();
    let firstAt = 0;
    let produced = 0;
    for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
      void token;
      if (produced++ === 0) firstAt = performance.now();
      if (produced >= count) break;
    }
    return { ttftMs: firstAt - started, restMs: performance.now() - firstAt, produced };
  }
  const decode = async () => {
    const decoded = await run(tokensOf(promptOf(DECODE_PROMPT, encode)), DECODE_TOKENS + 1);
    return { tokens: decoded.produced - 1, tokensPerSec: ((decoded.produced - 1) * 1000) / decoded.restMs };
  };
  const coldDecode = await decode(); // and the warm-up, as for ours
  const result = { engine: `llama.cpp (${threads} thread${threads > 1 ? "s" : ""})`, threads, loadMs, coldDecode, prefill: {} };
  for (const size of PROMPT_SIZES) {
    const tokens = tokensOf(promptOf(size, encode));
    const { ttftMs } = await run(tokens, 1);
    result.prefill[size] = { tokens: tokens.length, tokensPerSec: (tokens.length * 1000) / ttftMs, ttftMs };
  }
  result.decode = await decode();
  result.ttftMs = result.prefill[128].ttftMs;
  result.peakRssBytes = peakRss();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return result;
}

const result = engine === "llama" ? await measureLlama() : await measureOurs();
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
