// Shared by the benchmarks that run measure.mjs (bench.mjs, browser.mjs): one Node run of an
// engine in a fresh process, medians of runs, and reading a model file into the page cache.
import { spawn } from "node:child_process";
import { open } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { clearTimeout, setTimeout } from "node:timers";
import { relaxedSimdSupported } from "../dist/src/kernels/wasm/index.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const measureScript = fileURLToPath(new URL("./measure.mjs", import.meta.url));

/** Runs measure.mjs in a fresh process; its one JSON line, or an error record. */
export function measure(engine, path, threads, options) {
  const flags = engine === "ours-relaxed" && !relaxedSimdSupported() ? ["--experimental-wasm-relaxed-simd"] : [];
  const env = { ...process.env };
  if (engine === "ours-relaxed") env.INFER_WASM_KERNELS = "wasm-relaxed-simd";
  else if (engine === "ours" && options.relaxed) env.INFER_WASM_KERNELS = "wasm-simd";
  return new Promise((resolve) => {
    const args = [...flags, measureScript, engine, path, String(threads), ...(options.batchSize ? [String(options.batchSize)] : [])];
    const child = spawn(process.execPath, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 15 * 60 * 1000);
    child.on("close", (code) => {
      clearTimeout(timer);
      const line = out.trim().split("\n").pop();
      try {
        if (code !== 0) throw new Error(`exit ${code}`);
        resolve(JSON.parse(line));
      } catch {
        resolve({ error: `${engine} at ${threads} thread(s) failed (${code}): ${err.trim().split("\n").slice(-3).join(" | ")}` });
      }
    });
  });
}

export const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/** Per-field medians of successful runs. */
export function summarize(runs) {
  const ok = runs.filter((run) => !run.error);
  if (ok.length === 0) return { error: runs[0]?.error ?? "no runs" };
  const pick = (get) => median(ok.map(get));
  return {
    engine: ok[0].engine,
    threads: ok[0].threads,
    runs: ok.length,
    loadMs: pick((r) => r.loadMs),
    ttftMs: pick((r) => r.ttftMs),
    prefill128: pick((r) => r.prefill[128].tokensPerSec),
    prefill512: pick((r) => r.prefill[512].tokensPerSec),
    decode: pick((r) => r.decode.tokensPerSec),
    coldDecode: pick((r) => r.coldDecode.tokensPerSec),
    peakRssBytes: pick((r) => r.peakRssBytes),
    modelBytes: ok[0].modelBytes,
  };
}

/** Reads the file through once, so that it sits in the page cache. */
export async function warmPageCache(path) {
  const file = await open(path, "r");
  try {
    const chunk = Buffer.allocUnsafe(64 * 2 ** 20);
    while ((await file.read(chunk, 0, chunk.length, null)).bytesRead > 0);
  } finally {
    await file.close();
  }
}

/**
 * A model's heading and one row per engine (summarize()'s medians): load, TTFT, prefill and decode
 * rates, and a last column of the caller's ({ title, value(engine) -> text }).
 */
export function engineRows(result, last) {
  const mib = (bytes) => (bytes / 2 ** 20).toFixed(0);
  const fixed = (value, digits, width) => (Number.isFinite(value) ? value.toFixed(digits) : "-").padStart(width);
  const lines = [
    `\n${result.model}  (${mib(result.fileBytes)} MiB file; load average ${result.loadAverage.map((v) => v.toFixed(1)).join(" -> ")})`,
    `engine                    load ms   TTFT ms  prefill128 t/s  prefill512 t/s  decode t/s  cold decode t/s  ${last.title}`,
  ];
  for (const e of result.engines) {
    if (e.error) {
      lines.push(`  ${e.error}`);
      continue;
    }
    lines.push(
      `${e.engine.padEnd(25)} ${fixed(e.loadMs, 0, 7)} ${fixed(e.ttftMs, 0, 9)} ${fixed(e.prefill128, 1, 15)} ${fixed(e.prefill512, 1, 15)} ` +
        `${fixed(e.decode, 1, 11)} ${fixed(e.coldDecode, 1, 16)} ${last.value(e).padStart(last.title.length)}`,
    );
  }
  return lines;
}

/** Walks command-line arguments: handle(arg, value, list) for each, where value() takes the next argument and list() splits it at commas. */
export function eachArgument(argv, handle) {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    const list = () => value().split(",").map((item) => item.trim()).filter(Boolean);
    handle(arg, value, list);
  }
}

export function positive(name, text) {
  const number = Number(text);
  if (!Number.isInteger(number) || number < 1) throw new Error(`${name} must be a positive integer, got ${text}`);
  return number;
}
