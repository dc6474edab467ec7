#!/usr/bin/env node
// npm run soak -- [--seconds N] [--concurrency 20] [--backend wasm|llama_cpp|both] [--model path|random]
//                 [--max-rss-growth-mib M] [--json file]
// Starts the real `infer serve` on 127.0.0.1 and drives it with a mixed load; exits 1 on any
// violation. What it checks and why: docs/server.md, "Soak".
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { postJson, scrape, timedFetch } from "./http.mjs";
import { probeDisconnect, waitIdle } from "./probe.mjs";
import { growthSummary, rssSummary, sampleRss, sampleServerMemory, startServer } from "./server-process.mjs";
import { pickWeighted, requestMix, stalledBody, stalledHeaders, Tally } from "./traffic.mjs";

const root = new URL("../../", import.meta.url).pathname;
const STORIES = join(root, "../shared/models/stories260K/stories260K.gguf");
// stories260K has no chat template; this one makes chat requests servable.
const CHAT_TEMPLATE =
  "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
const MODEL = "soak";
const PROBE = "probe";
/** Tokens a disconnected stream may cost once the server has seen the disconnect (docs/server.md, "Soak"). */
const DISCONNECT_ALLOWANCE = 1;

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    concurrency: { type: "string", default: "20" },
    backend: { type: "string", default: "both" },
    model: { type: "string" },
    "chat-template": { type: "string" },
    "max-rss-growth-mib": { type: "string", default: "64" },
    json: { type: "string" },
    // One thread per model: llama.cpp threads spin while they wait, so more than the cores starve each other.
    threads: { type: "string", default: "1" },
  },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const maxGrowthMiB = Number(values["max-rss-growth-mib"]);
const backends = values.backend === "both" ? ["wasm", "llama_cpp"] : [values.backend];
if (!(seconds > 0 && seconds <= 24 * 3600) || !(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 256) || !(maxGrowthMiB > 0)) {
  console.error("soak: --seconds must be in (0, 86400], --concurrency an integer in [1, 256], --max-rss-growth-mib > 0");
  process.exit(2);
}
if (!backends.every((b) => b === "wasm" || b === "llama_cpp")) {
  console.error(`soak: --backend must be wasm, llama_cpp or both, not '${values.backend}'`);
  process.exit(2);
}

/** The model to serve: --model, else stories260K when the shared models are here, else (or for --model random) a random GGUF. */
async function modelToServe(scratch) {
  if (values.model && values.model !== "random") return { path: values.model, label: values.model, chatTemplate: values["chat-template"] };
  if (values.model !== "random" && existsSync(STORIES)) return { path: STORIES, label: "stories260K", chatTemplate: values["chat-template"] ?? CHAT_TEMPLATE };
  const { writeRandomGguf } = await import("@infer/wasm/testing");
  const path = join(scratch, "random-llama.gguf");
  await writeRandomGguf(path, { architecture: "llama", seed: 21, contextLength: 256 });
  return { path, label: "random llama GGUF (no shared models here)", chatTemplate: values["chat-template"] ?? CHAT_TEMPLATE };
}

/** Whether the served model answers `path` (chat, embeddings); a 5xx is a violation, a 4xx leaves the kind out. */
async function supports(url, path, body, tally, kind) {
  const res = await postJson(`${url}${path}`, { model: MODEL, ...body });
  const text = await res.text();
  tally.record(`${kind} (capability check)`, res.status);
  if (res.status >= 500) tally.violation(kind, `capability check answered ${res.status}: ${text.slice(0, 300)}`);
  return res.status === 200 ? true : `${res.status} ${text.slice(0, 160)}`;
}

const until = (deadline) => performance.now() < deadline;

async function soakBackend(backend, model) {
  const tally = new Tally();
  const args = [`${MODEL}=${model.path}`, `${PROBE}=${model.path}`, "--backend", backend, "--threads", values.threads];
  if (model.chatTemplate) args.push("--chat-template", model.chatTemplate);
  const server = await startServer(args);
  const rss = sampleRss(server.pid, 500);
  const serverMemory = sampleServerMemory(server.url);
  // The driver's own lag: a disconnect reaches the server only as fast as this process gets to abort.
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const ctx = { url: server.url, model: MODEL };
  const started = performance.now();
  const deadline = started + seconds * 1000;
  try {
    const chat = await supports(server.url, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2 }, tally, "chat");
    const embeddings = await supports(server.url, "/v1/embeddings", { input: "hi" }, tally, "embeddings");
    ctx.chat = chat === true;
    const mix = requestMix({ chat: chat === true, embeddings: embeddings === true });
    const worker = async () => {
      while (until(deadline)) {
        const [, kind, send] = pickWeighted(mix);
        await send(ctx, tally).catch((error) => tally.violation(kind, `client side: ${error.name}: ${error.message}`));
      }
    };
    const probes = [];
    const prober = async () => {
      while (until(deadline)) {
        const k = 1 + Math.floor(Math.random() * 6);
        const result = await probeDisconnect(server.url, PROBE, k).catch((error) => ({ violation: `${error.name}: ${error.message}` }));
        if (result?.violation) tally.violation("disconnect probe", result.violation);
        else if (result) {
          probes.push(result);
          if (result.generated > result.noticed + DISCONNECT_ALLOWANCE) {
            tally.violation(
              "disconnect probe",
              `aborted after ${result.received} tokens; ${result.noticed} generated when the server answered the next request, ${result.generated} in all`,
            );
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    // Stalled requests wait out the server's timeouts (headers 10 s, whole request 30 s): only in runs long enough to see them.
    const stalled = [
      ...(seconds >= 15 ? [stalledHeaders(ctx, tally).catch((error) => tally.violation("stalled headers", error.message))] : []),
      ...(seconds >= 45 ? [stalledBody(ctx, tally).catch((error) => tally.violation("stalled body", error.message))] : []),
    ];
    await Promise.all([...Array.from({ length: concurrency }, worker), prober(), ...stalled]);
    const elapsedS = (performance.now() - started) / 1000;
    lag.disable();
    const driverLagMs = { p50: lag.percentile(50) / 1e6, p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 };

    // Everything the clients started is over: both models must be idle, and the server must agree there were no 5xx.
    for (const name of [MODEL, PROBE]) {
      const idle = await waitIdle(server.url, name, { everyMs: 50, timeoutMs: 10_000 });
      if (idle.timedOut) tally.violation("end", `model '${name}' still has requests running or queued after the load`);
    }
    const metrics = await scrape(server.url);
    const serverStatuses = {};
    for (const [key, value] of metrics) {
      const status = /^infer_requests_total\{.*status="([^"]+)"\}$/.exec(key)?.[1];
      if (status) serverStatuses[status] = (serverStatuses[status] ?? 0) + value;
    }
    const server5xx = Object.entries(serverStatuses).filter(([s]) => s.startsWith("5")).reduce((n, [, v]) => n + v, 0);
    if (server5xx > 0) tally.violation("end", `the server counted ${server5xx} 5xx answers`);
    // Every refusal the clients got, the server counted (200s differ: the probes' scrapes, disconnects counted as aborted).
    const clientStatuses = tally.statusCounts();
    for (const status of new Set([...Object.keys(clientStatuses), ...Object.keys(serverStatuses)])) {
      if (Number(status) >= 400 && (clientStatuses[status] ?? 0) !== (serverStatuses[status] ?? 0)) {
        tally.violation("end", `clients got ${clientStatuses[status] ?? 0} × ${status}, the server counted ${serverStatuses[status] ?? 0}`);
      }
    }
    const health = await timedFetch(`${server.url}/health`, {}, 10_000);
    if (health.status !== 200) tally.violation("end", `/health answered ${health.status} after the load`);
    const modelTokens = ["prefill", "decode"].reduce((n, phase) => n + (metrics.get(`infer_model_tokens_total{model="${MODEL}",phase="${phase}"}`) ?? 0), 0);

    // Warm-up: the allocations that come with the first batches of each size and the JIT, not growth.
    const warmupS = Math.max(10, seconds / 5);
    const memory = rssSummary(rss.stop(), warmupS);
    const inside = await serverMemory.stop();
    memory.heapUsed = growthSummary(inside, warmupS, (s) => s.heapUsed);
    memory.external = growthSummary(inside, warmupS, (s) => s.external);
    if (memory.growthAfterWarmupMiB > maxGrowthMiB) {
      tally.violation("memory", `RSS grew ${memory.growthAfterWarmupMiB.toFixed(1)} MiB after warm-up (bound ${maxGrowthMiB} MiB)`);
    }
    const stop = await server.stop();
    if (!stop.graceful) tally.violation("end", `infer serve did not shut down cleanly on SIGTERM (${stop.code ?? stop.signal})`);
    return {
      backend,
      model: model.label,
      seconds: elapsedS,
      concurrency,
      chat: chat === true ? "served" : `left out (${chat})`,
      embeddings: embeddings === true ? "served" : `left out (${embeddings})`,
      requests: tally.requests,
      requestsPerSecond: tally.requests / elapsedS,
      byKind: Object.fromEntries([...tally.kinds].sort(([a], [b]) => a.localeCompare(b))),
      statuses: tally.statusCounts(),
      serverStatuses,
      clientTokens: tally.tokens,
      modelTokensPerSecond: modelTokens / elapsedS,
      memory,
      disconnectProbes: probeSummary(probes),
      driverLagMs,
      violations: tally.violations,
    };
  } catch (error) {
    rss.stop();
    await serverMemory.stop();
    await server.stop(2_000);
    throw new Error(`${error.message}\n--- infer serve stderr ---\n${server.stderr()}`);
  }
}

/** The value at quantile `q` of ascending `sorted`. */
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))];

function probeSummary(probes) {
  if (probes.length === 0) return { count: 0 };
  const afterNotice = probes.map((p) => p.generated - p.noticed);
  const inTransit = probes.map((p) => p.noticed - p.received).sort((a, b) => a - b);
  const release = probes.map((p) => p.releaseMs).sort((a, b) => a - b);
  const tokenMs = probes.map((p) => p.tokenMs).filter((t) => t !== undefined);
  const histogram = {};
  for (const n of afterNotice) histogram[n] = (histogram[n] ?? 0) + 1;
  return {
    count: probes.length,
    tokensAfterNotice: histogram,
    maxTokensAfterNotice: Math.max(...afterNotice),
    tokensInTransit: { median: quantile(inTransit, 0.5), p99: quantile(inTransit, 0.99), max: inTransit.at(-1) },
    releaseMs: { median: quantile(release, 0.5), p99: quantile(release, 0.99), max: release.at(-1) },
    meanTokenMs: tokenMs.length ? tokenMs.reduce((a, b) => a + b, 0) / tokenMs.length : undefined,
  };
}

function print(result) {
  const f = (x, d = 1) => (x === undefined ? "-" : x.toFixed(d));
  const m = result.memory;
  const p = result.disconnectProbes;
  console.log(`\n== soak: ${result.backend} (${result.model}), ${f(result.seconds)} s, ${result.concurrency} workers`);
  console.log(`requests ${result.requests} (${f(result.requestsPerSecond)}/s); chat ${result.chat}; embeddings ${result.embeddings}`);
  for (const [kind, k] of Object.entries(result.byKind)) console.log(`  ${kind.padEnd(30)} ${String(k.count).padStart(6)}  ${JSON.stringify(k.statuses)}`);
  console.log(`statuses (client) ${JSON.stringify(result.statuses)}; (server /metrics) ${JSON.stringify(result.serverStatuses)}`);
  console.log(`tokens: ${result.clientTokens} received by clients; model ${f(result.modelTokensPerSecond)} tokens/s`);
  console.log(
    `RSS MiB: start ${f(m.startMiB)}, peak ${f(m.peakMiB)}, end ${f(m.endMiB)}, after warm-up ${f(m.warmMiB)}; ` +
      `growth after warm-up ${f(m.growthAfterWarmupMiB)} (bound ${maxGrowthMiB}), slope ${f(m.slopeMiBPerMin, 2)} MiB/min, ${m.samples} samples`,
  );
  for (const [label, g] of [["V8 heap in use", m.heapUsed], ["outside the heap", m.external]]) {
    if (g?.samples) console.log(`${label} MiB: after warm-up ${f(g.warmMiB)}, end ${f(g.endMiB)}, growth ${f(g.growthAfterWarmupMiB)}, slope ${f(g.slopeMiBPerMin, 2)} MiB/min`);
  }
  console.log(
    p.count === 0
      ? "disconnect probes: none completed"
      : `disconnect probes ${p.count}: tokens after the server saw the disconnect ${JSON.stringify(p.tokensAfterNotice)} ` +
          `(max ${p.maxTokensAfterNotice}, allowed ${DISCONNECT_ALLOWANCE}); in transit ${p.tokensInTransit.median} median, ${p.tokensInTransit.p99} p99, ${p.tokensInTransit.max} max; ` +
          `slot free after ${f(p.releaseMs.median)} ms median, ${f(p.releaseMs.p99)} ms p99, ${f(p.releaseMs.max)} ms max; ${f(p.meanTokenMs, 2)} ms per token`,
  );
  const lag = result.driverLagMs;
  console.log(`soak driver's event-loop delay: ${f(lag.p50)} ms median, ${f(lag.p99)} ms p99, ${f(lag.max)} ms max`);
  const shown = result.violations.slice(0, 20);
  console.log(result.violations.length === 0 ? "violations: none" : `violations: ${result.violations.length}\n  ${shown.join("\n  ")}`);
}

const scratch = await mkdtemp(join(tmpdir(), "infer-soak-"));
let failed = false;
const results = [];
try {
  const model = await modelToServe(scratch);
  for (const backend of backends) {
    const result = await soakBackend(backend, model);
    results.push(result);
    print(result);
    failed ||= result.violations.length > 0;
  }
} catch (error) {
  console.error(`soak: ${error.stack ?? error}`);
  failed = true;
} finally {
  await rm(scratch, { recursive: true, force: true });
}
if (values.json) await writeFile(values.json, `${JSON.stringify(results, null, 2)}\n`);
console.log(failed ? "\nsoak: FAILED" : "\nsoak: passed");
process.exit(failed ? 1 : 0);
