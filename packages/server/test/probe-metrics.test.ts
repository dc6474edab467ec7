/**
 * What the served models measure themselves reaches /metrics: the server
 * attaches a ProbeMetrics sink to every model that takes one (a real wasm
 * model here). And /v1/embeddings counts its input with the model's own
 * tokenizer (llama_cpp over stories260K).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { loadModel, type TokenizerModel } from "@infer/core";
import "@infer/core/node";
import OpenAI from "openai";
import { createServer } from "../src/index.js";

// The engines register themselves on import; this package does not depend on them, so they are loaded by name.
await import("@infer/wasm" as string);
await import("@infer/llama-cpp" as string).catch(() => undefined);
const { writeRandomGguf } = (await import("@infer/wasm/testing" as string)) as {
  writeRandomGguf(path: string, spec: { architecture: "llama"; seed: number }): Promise<unknown>;
};

const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const stories = `${models}stories260K/stories260K.gguf`;

/** The value of one sample line of the Prometheus text. */
function sample(text: string, line: string): number {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  assert.ok(found, `no line ${line} in /metrics:\n${text}`);
  return Number(found.slice(line.length + 1));
}

test("/metrics shows probe-derived tokens, latencies and memory per served model", { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-probe-metrics-"));
  const path = join(dir, "llama.gguf");
  await writeRandomGguf(path, { architecture: "llama", seed: 5 });
  const model = await loadModel(path, { backend: "wasm", parallelSlots: 2 });
  const server = createServer({ models: { tiny: model } });
  try {
    const { url } = await server.listen(0, "127.0.0.1");
    const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
    const answers = await Promise.all(
      ["ab", "cd", "ef"].map((prompt) => openai.completions.create({ model: "tiny", prompt, max_tokens: 4, temperature: 0 })),
    );
    const completion = answers.reduce((n, a) => n + a.usage!.completion_tokens, 0);
    const text = await (await fetch(`${url}/metrics`)).text();
    assert.match(text, /^# TYPE infer_model_time_to_first_token_seconds histogram$/m);
    const prefill = sample(text, 'infer_model_tokens_total{model="tiny",phase="prefill"}');
    const decode = sample(text, 'infer_model_tokens_total{model="tiny",phase="decode"}');
    assert.equal(prefill + decode, completion, "the probes saw every completion token");
    assert.equal(prefill, answers.filter((a) => a.usage!.completion_tokens > 0).length, "one first token per answered request");
    assert.ok(sample(text, 'infer_model_calls_total{model="tiny"}') >= 1);
    assert.equal(sample(text, 'infer_model_time_to_first_token_seconds_count{model="tiny"}'), prefill);
    assert.equal(sample(text, 'infer_model_inter_token_seconds_count{model="tiny"}'), decode);
    const peak = sample(text, 'infer_model_memory_peak_bytes{model="tiny"}');
    const active = sample(text, 'infer_model_memory_active_bytes{model="tiny"}');
    assert.ok(active > 0 && peak >= active, `peak ${peak}, active ${active}`);
    assert.equal(peak, model.metrics().peakMemoryBytes);
    // The process's own memory, so a soak can tell heap growth from memory the allocator keeps.
    const rss = sample(text, "process_resident_memory_bytes");
    const heapTotal = sample(text, "nodejs_heap_size_total_bytes");
    const heapUsed = sample(text, "nodejs_heap_size_used_bytes");
    assert.ok(heapUsed > 0 && heapUsed <= heapTotal && heapTotal < rss, `rss ${rss}, heap ${heapUsed}/${heapTotal}`);
    assert.ok(sample(text, "nodejs_external_memory_bytes") >= sample(text, "nodejs_array_buffers_bytes"));
  } finally {
    await server.close();
    await model.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test(
  "/v1/embeddings usage counts the input tokens with the model's tokenizer",
  { skip: existsSync(stories) ? false : `needs ${stories} (the shared test models are not here)`, timeout: 60_000 },
  async () => {
    const model = await loadModel(stories, { backend: "llama_cpp", threads: 1, contextLength: 256 });
    const server = createServer({ models: { stories: model } });
    try {
      const { url } = await server.listen(0, "127.0.0.1");
      const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
      const input = ["Once upon a time", "there was a little dog named Spot"];
      const result = await openai.embeddings.create({ model: "stories", input, encoding_format: "float" });
      const expected = input.reduce((n, text) => n + (model as unknown as TokenizerModel).encode(text).length, 0);
      assert.ok(expected > input.length);
      assert.deepEqual(result.usage, { prompt_tokens: expected, total_tokens: expected });
      const single = await openai.embeddings.create({ model: "stories", input: "Once", encoding_format: "float" });
      assert.equal(single.usage.prompt_tokens, (model as unknown as TokenizerModel).encode("Once").length);
      const text = await (await fetch(`${url}/metrics`)).text();
      assert.equal(sample(text, 'infer_prompt_tokens_total{model="stories"}'), expected + single.usage.prompt_tokens);
    } finally {
      await server.close();
      await model.close();
    }
  },
);
