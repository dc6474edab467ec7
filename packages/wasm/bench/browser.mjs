#!/usr/bin/env node
// `npm run bench:browser`: our engine in headless Chromium against wllama (llama.cpp compiled to
// WebAssembly, @wllama/wllama, CPU only) on the same GGUF files, with our own Node figures for the
// same files in the same run. Not a test.
//
//   npm run bench:browser -- [--reps N] [--quick] [--threads 1,2] [--models smollm2,qwen25]
//                            [--types q8_0,q4_0] [--no-wllama] [--no-node] [--json file]
//
// Each run is protocol.mjs's sequence (load, cold decode, prefill of 128 and 512 prompt tokens,
// warm decode of 128 tokens with EOS ignored) in a fresh browser context (its own renderer process,
// nothing compiled or cached from an earlier run) or, for Node, a fresh process (measure.mjs).
// Figures are medians of --reps runs (default 3), the engines interleaved so that a busy spell of
// the machine hits them alike. Node runs the kernel build the page picked (relaxed SIMD where
// Chromium has it), so the browser/Node ratio is the browser's cost alone. Both engines in the
// page load the model from a 127.0.0.1 server (cross-origin isolated, so threads work) without a
// cache. --quick: one rep, the SmolLM2-135M shape only. Build first (`npm run build`).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { stat, writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { BENCH_SHAPES, benchModel } from "./bench-models.mjs";
import { promptsFor } from "./protocol.mjs";
import { eachArgument, engineRows, measure, positive, summarize, warmPageCache } from "./runs.mjs";
import { launchBrowser, REPO_ROOT, serve } from "../../../scripts/browser/index.mjs";

const BUNDLE = "/packages/wasm/dist/browser/index.js";
const PAGE = "/packages/wasm/bench/browser-page/";
const WLLAMA = "/node_modules/@wllama/wllama/esm/index.js";
const WLLAMA_WASM = "/node_modules/@wllama/wllama/esm/wasm/wllama.wasm";
/** The longest one page run may take (a 1-thread wllama run on the Qwen2.5-0.5B shape takes minutes). */
const RUN_TIMEOUT_MS = 20 * 60 * 1000;

function parseArguments(argv) {
  const options = { reps: 3, threads: [1, 2], models: ["smollm2", "qwen25"], types: ["q8_0", "q4_0"], wllama: true, node: true, json: undefined };
  eachArgument(argv, (arg, value, list) => {
    if (arg === "--quick") Object.assign(options, { reps: 1, models: ["smollm2"] });
    else if (arg === "--reps") options.reps = positive(arg, value());
    else if (arg === "--threads") options.threads = list().map((item) => positive(arg, item));
    else if (arg === "--models") options.models = list();
    else if (arg === "--types") options.types = list();
    else if (arg === "--no-wllama") options.wllama = false;
    else if (arg === "--no-node") options.node = false;
    else if (arg === "--json") options.json = value();
    else throw new Error(`unknown argument ${arg}`);
  });
  for (const model of options.models) if (!BENCH_SHAPES[model]) throw new Error(`unknown --models entry ${model}`);
  return options;
}

/** The commit measured, marked when the working tree has changes. */
function commit() {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO_ROOT, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: REPO_ROOT, encoding: "utf8" }).trim() !== "";
    return dirty ? `${head}+changes` : head;
  } catch {
    return "unknown";
  }
}

/** One page run in a fresh browser context; the run's record, or an error record. */
async function inBrowser(browser, origin, call, args) {
  const context = await browser.createBrowserContext();
  try {
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(`${origin}${PAGE}`, { waitUntil: "load" });
    try {
      return await page.evaluate(
        async (page, call, args) => (await import(`${page}run.js`))[call](args),
        PAGE,
        call,
        args,
      );
    } catch (error) {
      return { error: `${call} at ${args.threads} thread(s) failed: ${error.message.split("\n")[0]}${errors.length ? ` (${errors.join("; ")})` : ""}` };
    }
  } finally {
    await context.close();
  }
}

const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : NaN);

/** Per thread count: ours in the browser against wllama and against ours in Node, and each engine's cold/warm decode. */
function ratios(engines, threads) {
  const find = (kind, t) => engines.find((e) => !e.error && e.kind === kind && e.threads === t);
  return threads.map((t) => {
    const browser = find("ours-browser", t);
    const versus = (other) =>
      other && browser
        ? {
            prefill128: ratio(browser.prefill128, other.prefill128),
            prefill512: ratio(browser.prefill512, other.prefill512),
            decode: ratio(browser.decode, other.decode),
            load: ratio(browser.loadMs, other.loadMs),
          }
        : undefined;
    const coldWarm = Object.fromEntries(
      ["ours-browser", "wllama", "ours-node"].map((kind) => [kind, find(kind, t) ? ratio(find(kind, t).coldDecode, find(kind, t).decode) : undefined]),
    );
    return { threads: t, browserVsWllama: versus(find("wllama", t)), browserVsNode: versus(find("ours-node", t)), coldWarm };
  });
}

function formatTable(result) {
  const lines = engineRows(result, { title: "cold/warm", value: (e) => (e.coldDecode / e.decode).toFixed(2) });
  // The prompts are cut to exact counts by our tokenizer; say so when another engine's made others of them.
  for (const e of result.engines) {
    const counts = Object.entries(e.tokens ?? {}).filter(([size, p]) => p.tokens !== Number(size));
    if (counts.length) lines.push(`note: ${e.engine} evaluated ${counts.map(([size, p]) => `${p.tokens} tokens of the ${size}-token prompt`).join(", ")}`);
  }
  const x = (value) => (Number.isFinite(value) ? `${value.toFixed(2)}x` : "-");
  for (const r of result.ratios) {
    const parts = [];
    if (r.browserVsWllama) {
      const v = r.browserVsWllama;
      parts.push(`/ wllama: prefill128 ${x(v.prefill128)}, prefill512 ${x(v.prefill512)}, decode ${x(v.decode)}, load ${x(v.load)}`);
    }
    if (r.browserVsNode) {
      const v = r.browserVsNode;
      parts.push(`/ ours in Node: prefill128 ${x(v.prefill128)}, prefill512 ${x(v.prefill512)}, decode ${x(v.decode)}`);
    }
    if (parts.length) lines.push(`ours in the browser, ${r.threads} thread${r.threads > 1 ? "s" : ""} ${parts.join("; ")}`);
  }
  return lines.join("\n");
}

async function benchOne(label, path, options, context) {
  const { size } = await stat(path);
  await warmPageCache(path);
  // The prompts as our tokenizer counts them (the GGUF header only); wllama gets the same texts and
  // reports how many tokens its own tokenizer made of them.
  const { loadTokenizer } = await import("@infer/wasm");
  const tokenizer = await loadTokenizer(path);
  const prompts = promptsFor((text) => tokenizer.encode(text).length);
  const modelUrl = `${context.origin}/models/${encodeURIComponent(path.split("/").pop())}`;
  const jobs = [];
  for (const threads of options.threads) {
    jobs.push({ kind: "ours-browser", threads });
    if (options.wllama) jobs.push({ kind: "wllama", threads });
    if (options.node) jobs.push({ kind: "ours-node", threads });
  }
  const runs = new Map(jobs.map((job) => [`${job.kind}:${job.threads}`, []]));
  const loadBefore = loadavg()[0];
  for (let rep = 0; rep < options.reps; rep++) {
    for (const { kind, threads } of jobs) {
      let result;
      if (kind === "ours-browser") result = await inBrowser(context.browser, context.origin, "measureOurs", { bundleUrl: BUNDLE, modelUrl, threads, prompts });
      else if (kind === "wllama") {
        result = await inBrowser(context.browser, context.origin, "measureWllama", {
          wllamaUrl: WLLAMA,
          wasmUrl: `${context.origin}${WLLAMA_WASM}`,
          modelUrl,
          threads,
          prompts,
        });
      } else result = await measure(context.nodeEngine, path, threads, {});
      runs.get(`${kind}:${threads}`).push(result);
      process.stderr.write(result.error ? `\n  ${result.error}\n` : ".");
    }
  }
  process.stderr.write("\n");
  const engines = jobs.map(({ kind, threads }) => {
    const all = runs.get(`${kind}:${threads}`);
    const summary = summarize(all);
    const name = { "ours-browser": "ours browser", wllama: "wllama", "ours-node": "ours node" }[kind];
    return {
      ...summary,
      kind,
      threads,
      engine: `${name} (${threads} thread${threads > 1 ? "s" : ""})`,
      // What the engine reported it ran on (kernel build and threads), from its first good run.
      ran: all.find((r) => !r.error)?.kernels ?? all.find((r) => !r.error)?.used,
      tokens: all.find((r) => !r.error)?.prefill,
    };
  });
  return { model: label, path, fileBytes: size, loadAverage: [loadBefore, loadavg()[0]], engines, ratios: ratios(engines, options.threads) };
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  if (!existsSync(join(REPO_ROOT, BUNDLE))) throw new Error(`no browser bundle at ${BUNDLE}: run \`npm run build\` first`);
  const folder = join(REPO_ROOT, ".cache", "bench-models");
  const targets = [];
  for (const model of options.models) {
    for (const type of options.types) targets.push([`${BENCH_SHAPES[model].title} shape, ${type.toUpperCase()}`, await benchModel(folder, model, type)]);
  }
  const browser = await launchBrowser({ protocolTimeout: RUN_TIMEOUT_MS });
  const server = await serve({ root: REPO_ROOT, mounts: { "/models/": folder } });
  try {
    const probe = await inBrowser(browser, server.origin, "environment", BUNDLE);
    if (probe.error || !probe.crossOriginIsolated) throw new Error(`the bench page is not usable or not cross-origin isolated: ${JSON.stringify(probe)}`);
    const machine = {
      chromium: await browser.version(),
      node: process.version,
      cpu: cpus()[0]?.model ?? "unknown",
      logicalCpus: cpus().length,
      commit: commit(),
      date: new Date().toISOString(),
      loadAverage: loadavg(),
      relaxedSimd: probe.relaxedSimd,
    };
    const context = { browser, origin: server.origin, nodeEngine: probe.relaxedSimd ? "ours-relaxed" : "ours" };
    console.log(`${machine.chromium}, Node ${machine.node}, ${machine.cpu} (${machine.logicalCpus} logical CPUs), commit ${machine.commit}, ${machine.date}`);
    console.log(
      `medians of ${options.reps} run${options.reps > 1 ? "s" : ""}; our kernels: ${probe.relaxedSimd ? "relaxed SIMD" : "SIMD128"} in the page and in Node; ` +
        `load average ${machine.loadAverage.map((v) => v.toFixed(1)).join(" ")} (figures mean little on a busy machine)`,
    );
    const results = [];
    for (const [label, path] of targets) {
      const result = await benchOne(label, path, options, context);
      results.push(result);
      console.log(formatTable(result));
    }
    if (options.json) {
      await writeFile(options.json, `${JSON.stringify({ machine, options, results }, null, 2)}\n`);
      console.log(`\nwrote ${options.json}`);
    }
  } finally {
    await browser.close();
    await server.close();
  }
}

main().catch((error) => {
  console.error(error.message ?? error);
  process.exit(1);
});
