/**
 * The Platform in a browser (and any runtime without Node's modules): fetch, Web Workers,
 * navigator. Model files come as URLs, Blobs or bytes (see load/sources.ts): there is no file system.
 */
import { InferenceError } from "@infer/core";
import type { KernelWorker, PathFiles, Platform } from "./types.js";

/** The few browser globals used here (the package compiles without lib "dom"). */
interface WebWorker {
  postMessage(message: unknown): void;
  terminate(): void;
  addEventListener(type: "message" | "error" | "messageerror", listener: (event: { data?: unknown; message?: string }) => void): void;
}
interface BrowserGlobals {
  Worker?: new (url: URL, options: { type: "module"; name?: string }) => WebWorker;
  crossOriginIsolated?: boolean;
  navigator?: { hardwareConcurrency?: number; deviceMemory?: number };
  /** Present in worker scopes only. */
  WorkerGlobalScope?: unknown;
  addEventListener?(type: "message", listener: (event: { data: unknown }) => void, options?: { once: boolean }): void;
  postMessage?(message: unknown): void;
}
const web = globalThis as unknown as BrowserGlobals;

function startWorker(url: URL, setup: unknown): KernelWorker {
  if (!web.Worker) throw new InferenceError("BACKEND_UNAVAILABLE", "this runtime has no Web Workers for the kernel threads");
  const worker = new web.Worker(url, { type: "module", name: "infer-kernels" });
  let terminated = false;
  const failures: ((error: Error) => void)[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    worker.addEventListener("message", () => resolve());
    worker.addEventListener("error", (event) => {
      const error = new Error(`a kernel worker failed: ${event.message ?? "unknown error"}`);
      reject(error);
      if (!terminated) for (const listener of failures) listener(error);
    });
  });
  ready.catch(() => undefined);
  worker.postMessage(setup);
  return {
    ready,
    onFailure: (listener) => void failures.push(listener),
    async terminate() {
      terminated = true;
      worker.terminate();
    },
  };
}

const noFiles = (): never => {
  throw new InferenceError(
    "UNSUPPORTED",
    "file paths need Node's file system; in a browser, load a model from an http(s) URL, a Blob/File or an ArrayBuffer, " +
      "and take a trained adapter's files as bytes from adapter.peftFiles()",
  );
};

const files: PathFiles = {
  stat: noFiles,
  readText: noFiles,
  readTextStream: noFiles,
  writeText: noFiles,
  list: noFiles,
  readBytes: noFiles,
  writeAtomically: noFiles,
  // No file system: nothing is at any path (core then says no backend loads it).
  detectFormat: async () => "unknown",
  readGguf: noFiles,
  readGgufHeader: noFiles,
  readSafetensorsModel: noFiles,
  join: (...parts) => parts.join("/").replace(/\/+/g, "/"),
  dirname: (path) => path.replace(/\/[^/]*$/, "") || "/",
  basename: (path) => path.slice(path.lastIndexOf("/") + 1),
};

/** Tasks waiting for nextTask: a message posts a task at once (setTimeout(0) would be clamped to 4 ms when nested). */
const waiting: (() => void)[] = [];
interface Channel {
  port1: { onmessage: (() => void) | null };
  port2: { postMessage(message: unknown): void };
}
let channel: Channel | undefined;

function nextTask(): Promise<void> {
  if (!channel) {
    channel = new (globalThis as unknown as { MessageChannel: new () => Channel }).MessageChannel();
    channel.port1.onmessage = () => waiting.shift()?.();
  }
  const port = channel.port2;
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    port.postMessage(0);
  });
}

export const platform: Platform = {
  name: "browser",
  async readBinary(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url.href}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  },
  startWorker,
  workerEndpoint: () =>
    new Promise((resolve) => {
      web.addEventListener!("message", (event) => resolve({ setup: event.data, ready: () => web.postMessage!("ready") }), { once: true });
    }),
  // Logical cores: a page cannot tell physical ones apart.
  coreCount: () => Math.max(1, web.navigator?.hardwareConcurrency ?? 1),
  threadsUnavailable: () =>
    web.crossOriginIsolated === true
      ? undefined
      : "the page is not cross-origin isolated, so its workers cannot share memory: serve it with the headers " +
        "Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp to compute on several threads",
  // A page's main thread may not Atomics.wait; a worker's may.
  canBlock: web.WorkerGlobalScope !== undefined,
  // navigator.deviceMemory is rounded and capped (at 8 GiB) by design; 4 GiB where it is missing.
  nextTask,
  memoryBytes: () => (web.navigator?.deviceMemory ?? 4) * 2 ** 30,
  env: () => undefined,
  files,
};
