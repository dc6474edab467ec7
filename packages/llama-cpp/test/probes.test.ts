/**
 * The probe bus on llama_cpp with stories260K: token events per call with
 * steps from 0, per sequence in batches, logits on the logprobs path, no
 * attention (llama.cpp does not expose it), and a memory event after each
 * call whose peak is the process's resident peak, not the held bytes again.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { capabilitiesOf, loadModel, type ProbeEvent, type TokenizerModel } from "@infer/core";
import "../src/index.js";
import { STORIES_GGUF, skipWithoutStories, TEST_LOAD } from "./fixtures.js";

const GREEDY = { temperature: 0, ignoreEos: true };
const ofKind = <K extends ProbeEvent["kind"]>(events: ProbeEvent[], kind: K) =>
  events.filter((e): e is Extract<ProbeEvent, { kind: K }> => e.kind === kind);

describe("llama_cpp probe events", { skip: skipWithoutStories }, () => {
  test("steps restart each call; batches tag each sequence; logits with logprobs; never attention", async () => {
    const events: ProbeEvent[] = [];
    await using model = await loadModel(STORIES_GGUF, { ...TEST_LOAD, probe: (event) => events.push(event) });
    assert.equal(capabilitiesOf(model)["probe.attention"], "unsupported");
    const promptLength = (model as unknown as TokenizerModel).encode("Once").length;

    const first = await model.generateText("Once", { ...GREEDY, maxTokens: 4, logprobs: 0 });
    let tokens = ofKind(events, "token");
    assert.deepEqual(tokens.map((e) => e.payload.id), first.tokens.map((t) => t.id));
    assert.deepEqual(tokens.map((e) => e.step), [0, 1, 2, 3]);
    assert.deepEqual(tokens.map((e) => e.payload.position), [0, 1, 2, 3].map((i) => promptLength + i));
    const logits = ofKind(events, "logits");
    assert.deepEqual(logits.slice(0, 4).map((e) => [e.step, e.payload.topIds[0]]), first.tokens.map((t, i) => [i, t.id]));
    assert.equal(ofKind(events, "attention").length, 0);
    assert.equal(events[events.length - 1]!.kind, "memory");

    events.length = 0;
    await model.generateText("Once", { ...GREEDY, maxTokens: 2 });
    assert.deepEqual(ofKind(events, "token").map((e) => e.step), [0, 1], "step counters reset per call");

    events.length = 0;
    const prompts = ["Once", "The dog", "A"];
    const results = await model.batchGenerate(prompts, { ...GREEDY, maxTokens: 3, logprobs: 0 });
    tokens = ofKind(events, "token");
    for (const [index, result] of results.entries()) {
      const own = tokens.filter((e) => e.sequence === index);
      assert.deepEqual(own.map((e) => e.payload.id), result.tokens.map((t) => t.id), `sequence ${index}`);
      assert.deepEqual(own.map((e) => e.step), [0, 1, 2]);
      const ownLogits = ofKind(events, "logits").filter((e) => e.sequence === index);
      assert.deepEqual(ownLogits.map((e) => [e.step, e.payload.topIds[0]]), result.tokens.map((t, i) => [i, t.id]));
      const length = (model as unknown as TokenizerModel).encode(prompts[index]!).length;
      assert.deepEqual(own.map((e) => e.payload.position), [0, 1, 2].map((i) => length + i));
    }
    assert.equal(ofKind(events, "memory").length, 1);
  });

  test("each call's memory: peak at least what is held and at least the resident set it started with", async () => {
    const events: ProbeEvent[] = [];
    await using model = await loadModel(STORIES_GGUF, { ...TEST_LOAD, probe: { kinds: ["memory"], emit: (e) => events.push(e) } });
    const calls = [
      () => model.generateText("Once upon a time", { ...GREEDY, maxTokens: 8 }),
      () => model.batchGenerate(["Once", "The cat"], { ...GREEDY, maxTokens: 4 }),
      () => model.classify(["Once", "Twice"]),
    ];
    for (const call of calls) {
      events.length = 0;
      const residentBefore = process.memoryUsage.rss();
      await call();
      const [memory] = ofKind(events, "memory");
      assert.ok(memory, "every call ends with a memory event");
      const { peakBytes, activeBytes } = memory.payload;
      assert.ok(activeBytes > 0 && peakBytes >= activeBytes, `peak ${peakBytes}, active ${activeBytes}`);
      // The process's resident set includes the runtime, so the call's peak exceeds what llama.cpp holds
      // (stories260K holds a few MB). A page or two may move between the two readings of the RSS.
      assert.ok(peakBytes >= residentBefore - 64 * 1024, `peak ${peakBytes} below the RSS at the start ${residentBefore}`);
      assert.ok(peakBytes > activeBytes, "the peak is not a copy of the held bytes");
      assert.equal(model.metrics().peakMemoryBytes, peakBytes);
      assert.equal(model.metrics().activeMemoryBytes, activeBytes);
    }
  });
});
