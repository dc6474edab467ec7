/**
 * The probe bus on the wasm backend, with a small random llama GGUF: every
 * kind where it happens (token, logits, attention when asked, memory after
 * each call), per sequence in batches, steps from 0 in each call; the core
 * sinks fed by a real model; and the call's memory peak.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  isProbedModel,
  jsonlRecorder,
  loadModel,
  type LoadOptions,
  type ProbeEvent,
  ProbeMetrics,
  type SpanAttributes,
  spanSink,
  type TextModel,
  type TokenizerModel,
} from "@infer/core";
import "@infer/core/node";
import "../../src/index.js";
import { type RandomModelDims, writeRandomGguf } from "../../src/testing/index.js";

const dir = await mkdtemp(join(tmpdir(), "infer-probes-"));
after(() => rm(dir, { recursive: true, force: true }));
const path = join(dir, "llama.gguf");
let dims: RandomModelDims;
before(async () => {
  dims = await writeRandomGguf(path, { architecture: "llama", seed: 11, contextLength: 256 });
});

const LOAD: LoadOptions = { backend: "wasm", parallelSlots: 2, contextLength: 256 };
const GREEDY = { temperature: 0, ignoreEos: true };

async function withEvents(run: (model: TextModel, events: ProbeEvent[]) => Promise<void>, options: LoadOptions = {}): Promise<void> {
  const events: ProbeEvent[] = [];
  const model = await loadModel(path, { ...LOAD, ...options, probe: (event) => events.push(event) });
  try {
    await run(model, events);
  } finally {
    await model.close();
  }
}

const ofKind = <K extends ProbeEvent["kind"]>(events: ProbeEvent[], kind: K) =>
  events.filter((e): e is Extract<ProbeEvent, { kind: K }> => e.kind === kind);

describe("wasm probe events", () => {
  it("a stream emits token, logits and per-layer attention each step, then memory; steps restart each call", async () => {
    await withEvents(async (model, events) => {
      const promptLength = (model as unknown as TokenizerModel).encode("abc").length;
      const result = await model.generateText("abc", { ...GREEDY, maxTokens: 4 });
      const tokens = ofKind(events, "token");
      assert.deepEqual(tokens.map((e) => e.payload.id), result.tokens.map((t) => t.id));
      assert.deepEqual(tokens.map((e) => e.step), [0, 1, 2, 3]);
      assert.deepEqual(tokens.map((e) => e.phase), ["prefill", "decode", "decode", "decode"]);
      assert.deepEqual(tokens.map((e) => e.payload.position), [0, 1, 2, 3].map((i) => promptLength + i));
      assert.ok(tokens.every((e) => e.sequence === undefined && e.elapsedMs! >= 0));
      // Greedy: each step's logits put the emitted token first.
      assert.deepEqual(ofKind(events, "logits").map((e) => e.payload.topIds[0]), result.tokens.map((t) => t.id));
      const attention = ofKind(events, "attention");
      assert.equal(attention.length, 4 * dims.numLayers);
      for (const event of attention) {
        const seen = tokens[event.step]!.payload.position; // the query sits one before the sampled token
        assert.equal(event.payload.weights.length, dims.numHeads);
        for (const head of event.payload.weights) {
          assert.equal(head.length, seen);
          const sum = head.reduce((a, b) => a + b, 0);
          assert.ok(Math.abs(sum - 1) < 1e-5, `layer ${event.payload.layer} weights sum to ${sum}`);
        }
      }
      assert.deepEqual(attention.slice(0, dims.numLayers).map((e) => e.payload.layer), [...Array(dims.numLayers).keys()]);
      const last = events[events.length - 1]!;
      assert.equal(last.kind, "memory");
      assert.equal(last.step, 4);

      events.length = 0;
      await model.generateText("abc", { ...GREEDY, maxTokens: 2 });
      assert.deepEqual(ofKind(events, "token").map((e) => e.step), [0, 1], "step counters reset per call");
    });
  });

  it("asking for attention changes no token", async () => {
    let plain: number[] = [];
    await withEvents(async (model) => {
      plain = (await model.generateText("hello", { ...GREEDY, maxTokens: 8 })).tokens.map((t) => t.id);
    }, { probe: undefined });
    await withEvents(async (model, events) => {
      const probed = (await model.generateText("hello", { ...GREEDY, maxTokens: 8 })).tokens.map((t) => t.id);
      assert.deepEqual(probed, plain);
      assert.ok(ofKind(events, "attention").length > 0);
    });
  });

  it("attention is computed only for sinks that ask for it", async () => {
    const seen: ProbeEvent["kind"][] = [];
    await using model = await loadModel(path, { ...LOAD, probe: { kinds: ["token", "memory"], emit: (e) => seen.push(e.kind) } });
    await model.generateText("abc", { ...GREEDY, maxTokens: 3 });
    assert.deepEqual(seen, ["token", "token", "token", "memory"]);
  });

  it("batchGenerate emits each sequence's events with its prompt index, steps from 0 per sequence", async () => {
    await withEvents(async (model, events) => {
      const prompts = ["a", "bb", "ccc"];
      const results = await model.batchGenerate(prompts, { ...GREEDY, maxTokens: 3 });
      const tokens = ofKind(events, "token");
      for (const [index, result] of results.entries()) {
        const own = tokens.filter((e) => e.sequence === index);
        assert.deepEqual(own.map((e) => e.payload.id), result.tokens.map((t) => t.id), `sequence ${index}`);
        assert.deepEqual(own.map((e) => e.step), [0, 1, 2]);
        const promptLength = (model as unknown as TokenizerModel).encode(prompts[index]!).length;
        const attention = ofKind(events, "attention").filter((e) => e.sequence === index);
        assert.equal(attention.length, 3 * dims.numLayers);
        assert.deepEqual(
          attention.filter((e) => e.payload.layer === 0).map((e) => e.payload.weights[0]!.length),
          [0, 1, 2].map((i) => promptLength + i),
        );
      }
      assert.equal(ofKind(events, "memory").length, 1);
      assert.equal(events[events.length - 1]!.kind, "memory");
    });
  });
});

describe("wasm call memory", () => {
  it("the peak is the call's high-water mark: at least what is held, larger for longer prompts and batches", async () => {
    await withEvents(async (model, events) => {
      const peakOf = async (run: () => Promise<unknown>) => {
        events.length = 0;
        await run();
        const [memory] = ofKind(events, "memory");
        assert.ok(memory, "every call ends with a memory event");
        assert.ok(memory.payload.peakBytes >= memory.payload.activeBytes, `peak ${memory.payload.peakBytes} < active ${memory.payload.activeBytes}`);
        const { weightBytes, kvCacheBytes } = memory.payload;
        assert.ok(weightBytes! > 0 && kvCacheBytes! > 0);
        assert.ok(memory.payload.activeBytes > weightBytes! + kvCacheBytes!, "the scratch is held too");
        const metrics = model.metrics();
        assert.equal(metrics.peakMemoryBytes, memory.payload.peakBytes);
        assert.equal(metrics.activeMemoryBytes, memory.payload.activeBytes);
        return memory.payload.peakBytes;
      };
      const short = await peakOf(() => model.generateText("ab", { ...GREEDY, maxTokens: 2 }));
      const long = await peakOf(() => model.generateText("ab".repeat(60), { ...GREEDY, maxTokens: 2 }));
      assert.ok(long > short, `a longer prompt's chunk needs more scratch: ${long} vs ${short}`);
      // The scratch is kept for the next call: a short call now peaks where the long one did, no lower.
      const again = await peakOf(() => model.generateText("ab", { ...GREEDY, maxTokens: 2 }));
      assert.equal(again, long);
      const batch = await peakOf(() => model.batchGenerate(["ab".repeat(60), "cd".repeat(60)], { ...GREEDY, maxTokens: 2 }));
      assert.ok(batch > long, `two long prompts in one forward: ${batch} vs ${long}`);
      await peakOf(() => model.classify(["ab", "cd"]));
    });
  });
});

describe("core sinks fed by the wasm model", () => {
  it("JSONL recorder, metrics sink and span sink see what the model produced", async () => {
    const lines: string[] = [];
    const spans: { attributes: SpanAttributes; events: number; ended: boolean }[] = [];
    const startSpan = (_name: string, attributes: SpanAttributes) => {
      const span = { attributes: { ...attributes }, events: 0, ended: false };
      spans.push(span);
      return {
        setAttribute: (key: string, value: string | number | boolean) => (span.attributes[key] = value),
        addEvent: () => span.events++,
        end: () => (span.ended = true),
      };
    };
    await using model = await loadModel(path, {
      ...LOAD,
      probe: [jsonlRecorder((line) => lines.push(line), { kinds: ["token", "logits", "memory"] }), spanSink({ startSpan })],
    });
    assert.ok(isProbedModel(model));
    const metrics = new ProbeMetrics();
    const detach = model.attachProbe(metrics);
    const single = await model.generateText("abc", { ...GREEDY, maxTokens: 5 });
    const batch = await model.batchGenerate(["x", "yz"], { ...GREEDY, maxTokens: 3 });
    detach();
    await model.generateText("abc", { ...GREEDY, maxTokens: 2 });

    const recorded = lines.map((line) => JSON.parse(line) as ProbeEvent);
    assert.deepEqual(
      recorded.filter((e) => e.kind === "token" && e.sequence === undefined).slice(0, 5).map((e) => (e.kind === "token" ? e.payload.id : -1)),
      single.tokens.map((t) => t.id),
    );
    assert.equal(recorded.filter((e) => e.kind === "memory").length, 3);
    assert.equal(recorded.filter((e) => e.kind === "logits").length, recorded.filter((e) => e.kind === "token").length);

    const figures = metrics.snapshot();
    assert.equal(figures.calls, 2, "the detached sink saw two calls");
    assert.equal(figures.tokens.prefill + figures.tokens.decode, 5 + 6);
    assert.equal(figures.tokens.prefill, 3, "one first token per sequence");
    assert.equal(figures.timeToFirstTokenSeconds.count, 3);
    assert.equal(figures.interTokenSeconds.count, 4 + 2 + 2);
    assert.ok(figures.memoryPeakBytes >= figures.memoryActiveBytes && figures.memoryActiveBytes > 0);

    assert.equal(spans.length, 3);
    assert.ok(spans.every((s) => s.ended));
    assert.deepEqual(spans.map((s) => s.events), [5, batch.reduce((n, r) => n + r.tokens.length, 0), 2]);
    assert.equal(spans[1]!.attributes["infer.sequences"], 2);
    assert.ok((spans[0]!.attributes["infer.duration_ms"] as number) >= (spans[0]!.attributes["infer.time_to_first_token_ms"] as number));
  });
});
