// Page side of `npm run bench:browser` (../browser.mjs): one measurement run of one engine in a
// fresh headless Chromium context, protocol.mjs's sequence, the result as plain data.
import { CONTEXT, contractSteps, DECODE_TOKENS, measureSequence } from "../protocol.mjs";

const now = () => performance.now();
const label = (name, threads) => `${name} (${threads} thread${threads > 1 ? "s" : ""})`;

/** What the page offers the engines: threads need cross-origin isolation; relaxed SIMD picks our faster kernels. */
export async function environment(bundleUrl) {
  const infer = await import(bundleUrl);
  return { crossOriginIsolated: globalThis.crossOriginIsolated, relaxedSimd: infer.relaxedSimdSupported(), userAgent: navigator.userAgent };
}

/** Our engine from the self-contained bundle, loaded by URL (streamed into kernel memory, not cached). */
export async function measureOurs({ bundleUrl, modelUrl, threads, prompts }) {
  const infer = await import(bundleUrl);
  let kernels;
  let model;
  const result = await measureSequence(
    {
      load: async () => {
        // The kernels made here rather than by the loader, only to read back which build and how many
        // threads the model got; warmUp is on by default only for kernels the loader makes itself.
        kernels = await infer.createWasmKernels({ threads });
        model = await infer.loadWasmModel(modelUrl, { kernels, warmUp: true, contextLength: CONTEXT, parallelSlots: 1, cache: false });
      },
      prompts: () => prompts,
      ...contractSteps(() => model, now),
    },
    now,
  );
  const kernelName = kernels.name;
  await model.close();
  await kernels.dispose();
  return { engine: label("ours browser", threads), threads, kernels: kernelName, ...result };
}

/**
 * wllama (llama.cpp's server compiled to WebAssembly), CPU only. Its load fetches the file into a
 * Blob and loads that: wllama's own URL loader always goes through its Origin Private File System
 * cache, which ours skips here. Rates come from llama.cpp's own timings of each request.
 */
export async function measureWllama({ wllamaUrl, wasmUrl, modelUrl, threads, prompts }) {
  const { Wllama } = await import(wllamaUrl);
  const quiet = { debug() {}, log() {}, warn: console.warn, error: console.error };
  const wllama = new Wllama({ default: wasmUrl }, { suppressNativeLog: true, logger: quiet });
  const complete = (text, maxTokens) =>
    // cache_prompt off: each request evaluates its whole prompt, as ours does here.
    wllama.createCompletion({ prompt: text, max_tokens: maxTokens, temperature: 0, ignore_eos: true, cache_prompt: false });
  const result = await measureSequence(
    {
      load: async () => {
        const blob = await (await fetch(modelUrl)).blob();
        await wllama.loadModel([blob], { n_threads: threads, n_ctx: CONTEXT, n_gpu_layers: 0, n_parallel: 1 });
      },
      prompts: () => prompts,
      prefill: async (text) => {
        const started = now();
        const { timings } = await complete(text, 1);
        const ttftMs = now() - started;
        return { tokens: timings.prompt_n, tokensPerSec: (timings.prompt_n * 1000) / timings.prompt_ms, ttftMs };
      },
      decode: async (text) => {
        const { timings } = await complete(text, DECODE_TOKENS + 1);
        // llama.cpp counts the first token, sampled from the prompt's logits, among the predicted
        // ones and times it with them; ours leaves it to prefill. Both rates: the tokens after it.
        const tokens = timings.predicted_n - 1;
        return { tokens, tokensPerSec: (tokens * 1000) / timings.predicted_ms };
      },
    },
    now,
  );
  const used = { threads: wllama.getNumThreads(), multithread: wllama.isMultithread() };
  await wllama.exit();
  return { engine: label("wllama", threads), threads, used, ...result };
}
