import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { generateText, streamText } from "ai";
import { createInfer } from "../src/index.js";
import { ANSWER, FakeModel } from "./fake-model.js";

const TEXT = ANSWER.join("");
// The warnings are asserted on below; keep the SDK from also printing them.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

describe("AI SDK provider over a fake model", () => {
  test("generateText: text, usage and finish reason; options reach the model", async () => {
    const model = new FakeModel();
    const infer = createInfer({ models: { sky: model } });
    const result = await generateText({ model: infer("sky"), system: "Be brief.", prompt: "Why is the sky blue?", temperature: 0, seed: 3, topK: 2 });
    assert.equal(result.text, TEXT);
    assert.equal(result.finishReason, "stop");
    assert.equal(result.usage.outputTokens, ANSWER.length);
    const rendered = "[system] Be brief.\n[user] Why is the sky blue?\n[assistant] ";
    assert.deepEqual(model.prompts, [rendered]);
    assert.equal(result.usage.inputTokens, rendered.length);
    assert.equal(model.lastOptions?.temperature, 0);
    assert.equal(model.lastOptions?.seed, 3);
    assert.equal(model.lastOptions?.topK, 2);
  });

  test("maxOutputTokens gives finish reason length; stop sequences and provider options pass through", async () => {
    const model = new FakeModel();
    const infer = createInfer({ models: { sky: model } });
    const short = await generateText({ model: infer("sky"), prompt: "x", maxOutputTokens: 2 });
    assert.equal(short.text, "The sky");
    assert.equal(short.finishReason, "length");
    const stopped = await generateText({ model: infer("sky"), prompt: "x", stopSequences: [" is"], providerOptions: { infer: { minP: 0.2 } } });
    assert.equal(stopped.text, "The sky");
    assert.equal(model.lastOptions?.minP, 0.2);
  });

  test("streamText streams the deltas and reports usage", async () => {
    const model = new FakeModel(true, ANSWER, 2);
    const infer = createInfer({ models: { sky: model } });
    const result = streamText({ model: infer("sky"), prompt: "Why?" });
    const parts: string[] = [];
    for await (const delta of result.textStream) parts.push(delta);
    assert.deepEqual(parts, ANSWER);
    assert.equal(await result.finishReason, "stop");
    assert.equal((await result.usage).outputTokens, ANSWER.length);
  });

  test("a model without a chat template gets the plain prompt, with a warning", async () => {
    const model = new FakeModel(false);
    const infer = createInfer({ models: { base: model } });
    const result = await generateText({ model: infer("base"), prompt: "Once upon a time" });
    assert.equal(result.text, TEXT);
    assert.deepEqual(model.prompts, ["Once upon a time"]);
    assert.ok(result.warnings?.some((w) => w.type === "compatibility"));
  });

  test("an already loaded TextModel can be passed directly; abort stops the generation", async () => {
    const model = new FakeModel(true, Array(500).fill(" la"), 5);
    const infer = createInfer();
    const controller = new AbortController();
    const result = streamText({ model: infer(model), prompt: "sing", abortSignal: controller.signal });
    let seen = 0;
    for await (const _ of result.textStream) if (++seen === 3) controller.abort();
    assert.ok(seen < 500);
    assert.equal(model.aborts, 1);
  });

  test("a stream read only in part frees the model for the next call", async () => {
    const model = new FakeModel(true, Array(50).fill(" la"), 1);
    const infer = createInfer({ models: { la: model } });
    const { stream } = await infer("la").doStream({ prompt: [{ role: "user", content: [{ type: "text", text: "x" }] }] });
    const reader = stream.getReader();
    while ((await reader.read()).value?.type !== "text-delta");
    await reader.cancel();
    const next = await generateText({ model: infer("la"), prompt: "again", maxOutputTokens: 2 });
    assert.equal(next.text, " la la");
  });

  test("unknown model ids fail with the infer error", async () => {
    const infer = createInfer({ backendPackages: [] });
    await assert.rejects(generateText({ model: infer("/no/such/model.gguf"), prompt: "x", maxRetries: 0 }), /MODEL_NOT_FOUND|no model at/);
  });
});
