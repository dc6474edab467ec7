// Runs the real `infer serve` as a child process on loopback and watches its memory.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { scrape } from "./http.mjs";

const root = new URL("../../", import.meta.url).pathname;
const BIN = `${root}packages/cli/bin/infer.js`;
const MiB = 1024 * 1024;

/**
 * Starts `infer serve` with `args` (models and flags; --port 0 --host 127.0.0.1 are added) and
 * resolves once it prints the URL it serves at. Fails after `startTimeoutMs` or if it exits first.
 */
export async function startServer(args, { startTimeoutMs = 120_000 } = {}) {
  const child = spawn(process.execPath, [BIN, "serve", ...args, "--host", "127.0.0.1", "--port", "0"], {
    cwd: root,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`infer serve did not start within ${startTimeoutMs} ms:\n${stderr}`));
    }, startTimeoutMs);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text) => {
      stderr = (stderr + text).slice(-20_000);
      const found = /serving .* at (http:\/\/[^\s]+)\/v1/.exec(stderr);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`infer serve exited (${code ?? signal}) before serving:\n${stderr}`));
    });
  });
  return {
    url,
    pid: child.pid,
    stderr: () => stderr,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    /** SIGTERM, then SIGKILL after `graceMs`; resolves with how it ended. */
    stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode, graceful: false });
      return new Promise((resolve) => {
        const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
        child.once("exit", (code, signal) => {
          clearTimeout(kill);
          resolve({ code, signal, graceful: code === 0 });
        });
        child.kill("SIGTERM");
      });
    },
  };
}

/** The resident set size of process `pid` in bytes (Linux /proc), or undefined when it cannot be read. */
export function rssOf(pid) {
  try {
    const found = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return found ? Number(found[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Samples `pid`'s RSS every `everyMs` until stopped. */
export function sampleRss(pid, everyMs = 1000) {
  const samples = [];
  const started = performance.now();
  const take = () => {
    const rss = rssOf(pid);
    if (rss !== undefined) samples.push({ atS: (performance.now() - started) / 1000, rss });
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

/**
 * Start, peak and end RSS, and the growth after warm-up: the mean of the last fifth of the samples
 * minus the mean of the fifth right after `warmupS` (means, so that one garbage collection does not
 * decide it). `slopeMiBPerMin` is the least-squares slope over the samples after warm-up.
 */
export const rssSummary = (samples, warmupS) => growthSummary(samples, warmupS, (s) => s.rss);

/** The same figures for any sampled value (`value(sample)` in bytes). */
export function growthSummary(samples, warmupS, value) {
  const values = samples.map(value);
  const after = samples.filter((s) => s.atS >= warmupS);
  const fifth = Math.max(1, Math.floor(after.length / 5));
  const mean = (xs) => xs.reduce((a, s) => a + value(s), 0) / xs.length;
  const growth = after.length >= 2 ? mean(after.slice(-fifth)) - mean(after.slice(0, fifth)) : 0;
  let slope = 0;
  if (after.length >= 3) {
    const mt = after.reduce((a, s) => a + s.atS, 0) / after.length;
    const mv = mean(after);
    const num = after.reduce((a, s) => a + (s.atS - mt) * (value(s) - mv), 0);
    const den = after.reduce((a, s) => a + (s.atS - mt) ** 2, 0);
    slope = den > 0 ? (num / den) * 60 : 0;
  }
  return {
    samples: samples.length,
    startMiB: values[0] / MiB,
    peakMiB: Math.max(...values) / MiB,
    endMiB: values.at(-1) / MiB,
    warmMiB: after.length ? mean(after.slice(0, fifth)) / MiB : values.at(-1) / MiB,
    growthAfterWarmupMiB: growth / MiB,
    slopeMiBPerMin: slope / MiB,
  };
}

/**
 * Samples the server's own memory figures from /metrics (V8 heap in use, memory outside the heap)
 * every `everyMs`, so RSS growth can be told apart: a leak grows the heap or external memory, while
 * memory the allocator keeps for reuse shows in RSS alone.
 */
export function sampleServerMemory(url, everyMs = 2000) {
  const samples = [];
  const started = performance.now();
  let stopped = false;
  const take = async () => {
    try {
      const metrics = await scrape(url);
      const heapUsed = metrics.get("nodejs_heap_size_used_bytes");
      const external = metrics.get("nodejs_external_memory_bytes");
      if (heapUsed !== undefined && external !== undefined) samples.push({ atS: (performance.now() - started) / 1000, heapUsed, external });
    } catch {
      // A scrape that fails under load is a missing sample; the soak's own checks judge the server.
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await take();
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return samples;
    },
  };
}
