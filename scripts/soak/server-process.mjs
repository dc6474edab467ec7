// Runs the real `infer serve` as a child process on loopback and watches its memory.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

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
export function rssSummary(samples, warmupS) {
  const rss = samples.map((s) => s.rss);
  const after = samples.filter((s) => s.atS >= warmupS);
  const fifth = Math.max(1, Math.floor(after.length / 5));
  const mean = (xs) => xs.reduce((a, s) => a + s.rss, 0) / xs.length;
  const growth = after.length >= 2 ? mean(after.slice(-fifth)) - mean(after.slice(0, fifth)) : 0;
  let slope = 0;
  if (after.length >= 3) {
    const mt = after.reduce((a, s) => a + s.atS, 0) / after.length;
    const mr = mean(after);
    const num = after.reduce((a, s) => a + (s.atS - mt) * (s.rss - mr), 0);
    const den = after.reduce((a, s) => a + (s.atS - mt) ** 2, 0);
    slope = den > 0 ? (num / den) * 60 : 0;
  }
  return {
    samples: samples.length,
    startMiB: rss[0] / MiB,
    peakMiB: Math.max(...rss) / MiB,
    endMiB: rss.at(-1) / MiB,
    warmMiB: after.length ? mean(after.slice(0, fifth)) / MiB : rss.at(-1) / MiB,
    growthAfterWarmupMiB: growth / MiB,
    slopeMiBPerMin: slope / MiB,
  };
}
