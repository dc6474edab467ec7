import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { isInferenceError, loadModel } from "@infer/core";
import type { LlamaContext, LlamaModel } from "node-llama-cpp";
import "../src/index.js";
import type { LlamaCppModel } from "../src/index.js";
import { getRuntime } from "../src/runtime.js";
import { skipWithoutStories, STORIES_GGUF } from "./fixtures.js";

/**
 * Prompts longer than one llama.cpp batch are prefilled chunk by chunk (so an
 * abort can land between chunks). The oracle is node-llama-cpp driven
 * directly with the same model, context and threads.
 */
describe("prompts longer than a batch", { skip: skipWithoutStories }, () => {
  const load = { backend: "llama_cpp", threads: 1, contextLength: 2048, parallelSlots: 1 } as const;
  let model: LlamaCppModel;
  let rawModel: LlamaModel;
  let rawContext: LlamaContext;
  const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
  const longPrompt = story.repeat(18); // ~560 tokens: two batches of at most 512

  before(async () => {
    model = (await loadModel(STORIES_GGUF, load)) as LlamaCppModel;
    const llama = await getRuntime();
    rawModel = await llama.loadModel({ modelPath: STORIES_GGUF });
    rawContext = await rawModel.createContext({ contextSize: 2048, sequences: 1, threads: { ideal: 1, min: 1 } });
  });
  after(async () => {
    await model?.close();
    await rawContext?.dispose();
    await rawModel?.dispose();
  });

  test("greedy continuation equals node-llama-cpp's own", async () => {
    const ids = model.encode(longPrompt);
    assert.ok(ids.length > 512, `the prompt spans several batches (${ids.length} tokens)`);
    const result = await model.generateText(longPrompt, { temperature: 0, maxTokens: 20, ignoreEos: true });
    const expected: number[] = [];
    const sequence = rawContext.getSequence();
    for await (const id of sequence.evaluate(ids as Parameters<typeof sequence.evaluate>[0], { temperature: 0, yieldEogToken: true })) {
      expected.push(id);
      if (expected.length === 20) break;
    }
    sequence.dispose();
    assert.deepEqual(
      result.tokens.map((t) => t.id),
      expected,
    );
    assert.equal(result.metrics.promptTokens, ids.length);
  });

  test("an aborted long prefill throws ABORTED and leaves the model usable", async () => {
    const controller = new AbortController();
    // A prompt sharing no prefix with the cached one, so the whole of it is prefilled.
    const other = "The dog ran to the big tree and barked at the cat. ".repeat(18);
    const running = model.generateText(other, { temperature: 0, maxTokens: 5, signal: controller.signal });
    // Abort while the prefill is under way (the first chunk is in llama.cpp by now).
    setImmediate(() => controller.abort());
    const aborted = await running;
    assert.equal(aborted.finishReason, "abort");
    assert.equal(aborted.tokens.length, 0);
    assert.ok(isInferenceError(model.err(), "ABORTED"));
    const again = await model.generateText("Once upon a time", { temperature: 0, maxTokens: 5 });
    assert.equal(again.tokens.length, 5);
  });
});
