// One measurement run in a fresh process (so peak RSS is this engine's alone):
//   node measure.mjs <ours|ours-relaxed|ours-no-warm-up|llama> <model.gguf|folder> <threads>
// runs protocol.mjs's sequence and prints one JSON line: load time, time to first token and prefill rate for a
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
import { CONTEXT, contractSteps, DECODE_TOKENS, measureSequence, promptsFor } from "./protocol.mjs";

const [engine, modelPath, threadsArg, batchSizeArg] = process.argv.slice(2);
const threads = Number(threadsArg);
/** Most prompt tokens per forward pass; undefined: each engine's default (ours 128, llama.cpp 512). */
const batchSize = batchSizeArg === undefined ? undefined : Number(batchSizeArg);
if (!["ours", "ours-relaxed", "ours-no-warm-up", "llama"].includes(engine) || !modelPath || !(threads >= 1)) {
  console.error("usage: node measure.mjs <ours|ours-relaxed|ours-no-warm-up|llama> <model> <threads> [batch size]");
  process.exit(2);
}

const now = () => performance.now();

function peakRss() {
  return process.resourceUsage().maxRSS * 1024;
}

async function measureOurs() {
  const { loadModel: coreLoad } = await import("@infer/core");
  const { loadWasmModel } = await import("@infer/wasm"); // the package entry, as an application imports it (its bundle: scripts/bundle.mjs)
  // Core's loadModel takes only the contract's options; the warm-up switch is the backend's own.
  const loadModel = engine === "ours-no-warm-up" ? (path, options) => loadWasmModel(path, { ...options, warmUp: false }) : coreLoad;
  // The last call's memory event: its weights and KV cache are what peak RSS is measured against.
  let memory;
  const probe = { kinds: ["memory"], emit: (event) => (memory = event.payload) };
  let model;
  const measured = await measureSequence(
    {
      load: async () => {
        model = await loadModel(modelPath, { backend: "wasm", threads, contextLength: CONTEXT, parallelSlots: 1, batchSize, probe });
      },
      prompts: () => promptsFor((text) => model.encode(text).length),
      ...contractSteps(() => model, now),
    },
    now,
  );
  // ours-relaxed: the relaxed-SIMD kernels (bench.mjs sets INFER_WASM_KERNELS and the V8 flag for it).
  const name = { "ours-relaxed": "ours relaxed", "ours-no-warm-up": "ours no warm-up" }[engine] ?? "ours";
  const result = { engine: `${name} (${threads} thread${threads > 1 ? "s" : ""})`, threads, ...measured };
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
  let model;
  let context;
  let sequence;
  /** Evaluates a prompt and `count` tokens greedily; returns the time to the first and the time between first and last. */
  async function run(text, count) {
    const tokens = model.tokenize(text, false);
    await sequence.clearHistory();
    const started = now();
    let firstAt = 0;
    let produced = 0;
    for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
      void token;
      if (produced++ === 0) firstAt = performance.now();
      if (produced >= count) break;
    }
    return { tokens: tokens.length, ttftMs: firstAt - started, restMs: performance.now() - firstAt, produced };
  }
  const measured = await measureSequence(
    {
      load: async () => {
        model = await llama.loadModel({ modelPath, gpuLayers: 0 });
        context = await model.createContext({ contextSize: CONTEXT, sequences: 1, threads, batchSize: batchSize ?? 512 });
        sequence = context.getSequence();
      },
      prompts: () => promptsFor((text) => model.tokenize(text, false).length),
      prefill: async (text) => {
        const { tokens, ttftMs } = await run(text, 1);
        return { tokens, tokensPerSec: (tokens * 1000) / ttftMs, ttftMs };
      },
      decode: async (text) => {
        const decoded = await run(text, DECODE_TOKENS + 1);
        return { tokens: decoded.produced - 1, tokensPerSec: ((decoded.produced - 1) * 1000) / decoded.restMs };
      },
    },
    now,
  );
  const result = { engine: `llama.cpp (${threads} thread${threads > 1 ? "s" : ""})`, threads, ...measured };
  result.peakRssBytes = peakRss();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return result;
}

const result = engine === "llama" ? await measureLlama() : await measureOurs();
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
