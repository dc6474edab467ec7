#!/usr/bin/env node
// Backend remote's cost over a plain SSE client, against a real llama-server on stories260K:
//  1. one stream: tokens/s of remote's generate vs a raw fetch + SSE parse of the same request body
//     (so the server does the same work; only the clients differ). Target: overhead <= 3%.
//  2. 16 concurrent streams: aggregate tokens/s of remote's batchGenerate (maxConcurrency 16) vs 16 raw
//     clients at once. Target: remote >= 90% of raw.
// Runs alternate between the two clients so machine noise hits both alike; medians are compared.
//
//   npm run bench:remote -- [--tokens n] [--runs n]
//
// Needs `npm run build` first (it imports the compiled package and its test helper, which builds
// llama-server when this machine has none: see scripts/llama-server/build.mjs).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { loadRemoteModel } from "@infer/remote";
import { startLlamaServer } from "../dist/test/llama-server.js";

const { values } = parseArgs({
  options: {
    tokens: { type: "string", default: "256" },
    runs: { type: "string", default: "7" },
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

try {
  // Warm both paths once.
  await rawStream();
  await remoteStream();
  const single = { raw: [], remote: [] };
  const many = { raw: [], remote: [] };
  for (let run = 0; run < runs; run++) {
    single.raw.push(await rate(rawStream));
    single.remote.push(await rate(remoteStream));
    many.raw.push(await rate(async () => (await Promise.all(Array.from({ length: streams }, rawStream))).reduce((a, b) => a + b, 0)));
    many.remote.push(
      await rate(async () => {
        const results = await model.batchGenerate(Array.from({ length: streams }, () => prompt), options);
        return results.reduce((sum, r) => sum + r.tokens.length, 0);
      }),
    );
  }
  const report = (name, figures) => {
    const raw = median(figures.raw);
    const remote = median(figures.remote);
    console.log(`${name}: raw fetch ${raw.toFixed(0)} tok/s, remote ${remote.toFixed(0)} tok/s, remote/raw ${(remote / raw * 100).toFixed(1)}%`);
  };
  console.log(`llama-server, stories260K, ${tokens} tokens per stream, median of ${runs} alternating runs`);
  report("1 stream", single);
  report(`${streams} concurrent streams (aggregate)`, many);
} finally {
  await model.close();
  await server.kill();
}
