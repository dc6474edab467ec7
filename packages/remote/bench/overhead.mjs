#!/usr/bin/env node
// Backend remote's cost over a plain SSE client, against a real llama-server on stories260K:
//  1. one stream: tokens/s of remote's generate vs a raw fetch + SSE parse of the same request body
//     (so the server does the same work; only the clients differ). Target: overhead <= 3%.
//  2. 16 concurrent streams: aggregate tokens/s of 16 `generate` streams through one remote model
//     (maxConcurrency 16) vs 16 raw clients at once. Target: remote >= 90% of raw.
// Each run measures both clients back to back, in alternating order (raw first, then remote first), so
// drifting machine load hits both alike; the verdict is the median of the per-run ratios remote/raw
// (medians of each side's tokens/s are shown beside it). The load average is printed before and after:
// on a busy machine the figures are noise, rerun them idle.
//
//   npm run bench:remote -- [--tokens n] [--runs n]
//
// Needs `npm run build` first (it imports the compiled package and its test helper, which builds
// llama-server when this machine has none: see scripts/llama-server/build.mjs).
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { loadRemoteModel } from "@infer/remote";
import { startLlamaServer } from "../dist/test/llama-server.js";

const { values } = parseArgs({
  options: {
    tokens: { type: "string", default: "256" },
    runs: { type: "string", default: "15" },
    streams: { type: "string", default: "16" },
  },
});
const tokens = Number(values.tokens);
const runs = Number(values.runs);
const streams = Number(values.streams);
const prompt = "Once upon a time";

const server = await startLlamaServer({ contextLength: streams * (tokens + 64), slots: streams });
const model = await loadRemoteModel(server.url, { remote: { maxConcurrency: streams } });
const options = { temperature: 0, maxTokens: tokens, ignoreEos: true };

// The body remote sends for these options (its dialect's fields), so the raw client asks the same work.
const body = {
  model: model.server.model,
  prompt,
  temperature: 0,
  top_p: 0.95,
  top_k: 40,
  min_p: 0.05,
  ignore_eos: true,
  n_probs: 1,
  max_tokens: tokens,
  stream: true,
  stream_options: { include_usage: true },
  timings_per_token: true,
};

/** A minimal SSE client: fetch, split events, JSON.parse each, count the tokens. */
async function rawStream() {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const decoder = new TextDecoder();
  let buffer = "";
  let count = 0;
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.startsWith("data: ") ? event.slice(6) : "";
      if (!data || data === "[DONE]") continue;
      const parsed = JSON.parse(data);
      if (parsed.choices?.[0]?.logprobs?.content?.length) count += parsed.choices[0].logprobs.content.length;
    }
  }
  return count;
}

async function remoteStream() {
  let count = 0;
  for await (const _token of model.generate(prompt, options)) count++;
  return count;
}

async function rate(work) {
  const start = performance.now();
  const count = await work();
  return (count * 1000) / (performance.now() - start);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** `count` streams of `one` at once; their tokens add up. */
const concurrently = (one, count) => async () => (await Promise.all(Array.from({ length: count }, one))).reduce((a, b) => a + b, 0);

/** Both clients once each, the order alternating with the run. */
async function pair(run, raw, remote) {
  if (run % 2 === 0) {
    const r = await rate(raw);
    return { raw: r, remote: await rate(remote) };
  }
  const m = await rate(remote);
  return { raw: await rate(raw), remote: m };
}

const load = () => loadavg().map((x) => x.toFixed(1)).join(" ");

try {
  console.log(`llama-server, stories260K, ${tokens} tokens per stream, ${runs} paired runs; load average before: ${load()}`);
  // Warm both paths once.
  await rawStream();
  await remoteStream();
  const single = [];
  const many = [];
  for (let run = 0; run < runs; run++) {
    single.push(await pair(run, rawStream, remoteStream));
    many.push(await pair(run, concurrently(rawStream, streams), concurrently(remoteStream, streams)));
  }
  const report = (name, pairs, target) => {
    const ratio = median(pairs.map((p) => p.remote / p.raw));
    const verdict = ratio >= target ? "meets" : "misses";
    console.log(
      `${name}: raw fetch ${median(pairs.map((p) => p.raw)).toFixed(0)} tok/s, remote ${median(pairs.map((p) => p.remote)).toFixed(0)} tok/s ` +
        `(medians); remote/raw ${(ratio * 100).toFixed(1)}% (median of per-run ratios, ${(Math.min(...pairs.map((p) => p.remote / p.raw)) * 100).toFixed(1)}-` +
        `${(Math.max(...pairs.map((p) => p.remote / p.raw)) * 100).toFixed(1)}%): ${verdict} the target >= ${target * 100}%`,
    );
  };
  report("1 stream", single, 0.97);
  report(`${streams} concurrent streams (aggregate)`, many, 0.9);
  console.log(`load average after: ${load()}`);
} finally {
  await model.close();
  await server.kill();
}
