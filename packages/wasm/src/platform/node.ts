/** The Platform on Node (and runtimes with Node compatibility): node:fs, worker_threads, os. */
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { basename, dirname, join } from "node:path";
import { parentPort, Worker, workerData } from "node:worker_threads";
import { detectFormat } from "@infer/core/node";
import { InferenceError } from "@infer/core";
import { readGguf, readGgufHeader, readSafetensorsModel, readWholeFile } from "@infer/formats/node";
import type { KernelWorker, Platform } from "./types.js";

/** Physical cores (SIMD kernels gain little from a core's second hardware thread). */
function physicalCoreCount(): number {
  const logical = availableParallelism();
  try {
    // Linux: one distinct (physical id, core id) pair per core.
    const cores = new Set<string>();
    let physical = "0";
    for (const line of readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
      const [key, value] = line.split(":").map((part) => part.trim());
      if (key === "physical id") physical = value ?? "0";
      else if (key === "core id") cores.add(`${physical}:${value}`);
    }
    // availableParallelism respects CPU affinity; never exceed it.
    return cores.size > 0 ? Math.min(cores.size, logical) : logical;
  } catch {
    return logical;
  }
}

function startWorker(url: URL, setup: unknown): KernelWorker {
  // No inherited node flags: the worker needs none, and some (--input-type, --eval) make it fail to start.
  const worker = new Worker(url, { workerData: setup, execArgv: [] });
  let terminating = false;
  const ready = new Promise<void>((resolve, reject) => {
    // Unref'd so that a process that never disposes the kernels still exits; only once ready, since
    // Deno ends a test whose pending promise waits on unref'd workers alone.
    worker.once("message", () => {
      worker.unref();
      resolve();
    });
    worker.once("error", reject);
  });
  ready.catch(() => undefined);
  return {
    ready,
    onFailure(listener) {
      worker.on("error", listener);
      worker.on("exit", () => {
        if (!terminating) listener(new Error("a kernel worker exited"));
      });
    },
    async terminate() {
      terminating = true;
      await worker.terminate();
    },
  };
}

async function writeAtomically(path: string, data: Uint8Array | string): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`;
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(temp, data);
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    const errno = error as NodeJS.ErrnoException;
    throw new InferenceError("IO", `cannot write ${path}: ${errno.code ?? String(error)}`, { cause: error, details: { path } });
  }
}

const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

export const platform: Platform = {
  name: "node",
  readBinary: async (url) => new Uint8Array(await readFile(url)),
  startWorker,
  workerEndpoint: async () => ({ setup: workerData, ready: () => parentPort!.postMessage("ready") }),
  coreCount: physicalCoreCount,
  threadsUnavailable: () => undefined,
  // Node lets its main thread block in Atomics.wait.
  canBlock: true,
  nextTask: () => new Promise<void>((resolve) => setImmediate(resolve)),
  memoryBytes: totalmem,
  env: (name) => process.env[name],
  files: {
    async stat(path) {
      try {
        const info = await stat(path);
        return { isDirectory: info.isDirectory(), size: info.size };
      } catch {
        return undefined;
      }
    },
    // Through readWholeFile, which refuses pipes and devices instead of waiting on them; the BOM is kept, as readFile keeps it.
    readText: async (path) => utf8.decode(await readWholeFile(path, "text")),
    readTextStream: (path) => readFile(path, "utf8"),
    async writeText(path, text) {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, text);
    },
    list: (folder) => readdir(folder),
    readBytes: readWholeFile,
    writeAtomically,
    detectFormat,
    readGguf,
    readGgufHeader,
    readSafetensorsModel,
    join,
    dirname,
    basename,
  },
};
