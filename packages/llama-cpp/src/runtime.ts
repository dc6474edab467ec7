import type { Llama } from "node-llama-cpp";
import { defaultProbeCache, mappedLibraryStamp, probeGpu } from "./gpu-probe.js";

/**
 * The one llama.cpp runtime of this process. node-llama-cpp is imported lazily
 * so that importing @infer/llama-cpp (which registers the backend) stays cheap
 * and never fails where the native binary is missing; `available()` reports that.
 */
let runtime: Promise<Llama> | undefined;
const RECENT_LOG_LINES = 8;
const recentLog: string[] = [];

/**
 * Runs `work` and, if it throws, returns llama.cpp's error-log lines written
 * meanwhile (the reason behind node-llama-cpp's generic "Failed to load model").
 */
export async function withLlamaLog<T>(work: () => Promise<T>): Promise<T> {
  recentLog.length = 0;
  try {
    return await work();
  } catch (error) {
    // node-llama-cpp's own note about falling back to estimates is not a reason.
    const lines = recentLog.filter((line) => !/^Failed simulating/.test(line));
    if (lines.length > 0 && error instanceof Error) error.message += ` (llama.cpp: ${[...new Set(lines)].join("; ")})`;
    throw error;
  }
}
let failure: string | undefined;

export type NodeLlamaCpp = typeof import("node-llama-cpp");

let library: Promise<NodeLlamaCpp> | undefined;

export function nodeLlamaCpp(): Promise<NodeLlamaCpp> {
  library ??= import("node-llama-cpp");
  return library;
}

/**
 * Loads the prebuilt binary: the GPU flavour when one is installed and usable,
 * the CPU one otherwise. `build: "never"` because a backend must never download
 * sources or compile at run time; `maxThreads: 0` so each context's `threads`
 * is used exactly (the load option decides, not node-llama-cpp's default).
 */
export function getRuntime(): Promise<Llama> {
  runtime ??= (async () => {
    const { getLlama, LlamaLogLevel } = await nodeLlamaCpp();
    const gpuChoice = process.env.INFER_LLAMA_CPP_GPU;
    const open = (gpu: "auto" | false) =>
      getLlama({
        gpu,
        build: "never",
        usePrebuiltBinaries: true,
        progressLogs: false,
        skipDownload: true,
        maxThreads: 0,
        logLevel: LlamaLogLevel.warn,
        // llama.cpp explains a failed load only in its log; keep the recent lines
        // for error messages instead of printing them.
        logger: (level, message) => {
          const serious = level === LlamaLogLevel.error || level === LlamaLogLevel.fatal;
          if (serious || (level === LlamaLogLevel.warn && /error|fail|invalid|corrupt|missing|not within|does not/i.test(message))) {
            recentLog.push(message.trim());
            if (recentLog.length > RECENT_LOG_LINES) recentLog.shift();
          }
        },
      });
    const llama = await open(gpuChoice === "false" ? false : "auto");
    // A GPU picked automatically must first run a model in a child process (gpu-probe.ts);
    // INFER_LLAMA_CPP_GPU naming the flavour says it is known to work.
    if (llama.gpu === false || gpuChoice === llama.gpu) return llama;
    const devices = await llama.getGpuDeviceNames().catch(() => []);
    const cacheKey = `${llama.llamaCppRelease?.release ?? "?"} ${devices.join(",")} ${await mappedLibraryStamp(llama.gpu)}`.trimEnd();
    const reason = await probeGpu(llama.gpu, { cacheFile: defaultProbeCache(), cacheKey });
    if (reason === undefined) return llama;
    process.emitWarning(
      `llama_cpp: the ${llama.gpu} binary failed a test decode on ${devices.join(", ") || "this GPU"} (${reason}); ` +
        `running on the CPU instead. INFER_LLAMA_CPP_GPU=false skips the check; docs/llama-cpp.md explains the GPU setup.`,
      { code: "INFER_GPU_UNUSABLE" },
    );
    await llama.dispose();
    return open(false);
  })();
  runtime.catch((error: unknown) => {
    failure = error instanceof Error ? error.message : String(error);
  });
  return runtime;
}

export async function runtimeAvailable(): Promise<boolean> {
  try {
    await getRuntime();
    return true;
  } catch {
    return false;
  }
}

export async function runtimeUnavailableReason(): Promise<string> {
  if (await runtimeAvailable()) return "the llama.cpp runtime loaded (it is available)";
  return (
    `no prebuilt llama.cpp binary could be loaded (${failure ?? "unknown error"}); install node-llama-cpp ` +
    "with the binary package of this platform, e.g. `npm install node-llama-cpp @node-llama-cpp/linux-x64`"
  );
}

/** node-llama-cpp brands token ids; ours are plain numbers (the same values). */
export type LlamaToken = import("node-llama-cpp").Token;
export function asLlamaTokens(ids: readonly number[]): LlamaToken[] {
  return ids as LlamaToken[];
}
