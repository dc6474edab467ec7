import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { capabilitiesOf, isInferenceError, loadModel, type TextModel, type Token } from "@infer/core";
import { assertRunawayTemplatesFail } from "@infer/core/testing";
import "../src/index.js";
import type { LlamaCppModel } from "../src/index.js";
import { skipWithoutStories, STORIES_EXPECTED, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

const GREEDY = { temperature: 0 } as const;
const PROMPTS = ["Once upon a time", "The dog", "Lily and Ben", "One day, a little"];

describe("llama_cpp on stories260K", { skip: skipWithoutStories }, () => {
  let model: LlamaCppModel;

  before(async () => {
    model = (await loadModel(STORIES_GGUF, TEST_LOAD)) as LlamaCppModel;
  });
  after(async () => {
    await model?.close();
  });

  test("greedy 200 tokens from BOS equal llama2.c's published output", async () => {
    const expected = readFileSync(STORIES_EXPECTED, "utf8").replace(/\n$/, "");
    const result = await model.generateText("", { ...GREEDY, maxTokens: 200 });
    assert.equal(result.tokens.length, 200);
    assert.equal(result.finishReason, "length");
    assert.equal(result.text, expected);
    assert.equal(result.metrics.promptTokens, 1); // BOS only
    assert.equal(result.metrics.generatedTokens, 200);
    assert.ok(result.metrics.decodeTokensPerSec > 0 && result.metrics.totalMs >= result.metrics.prefillMs);
    assert.ok(result.metrics.activeMemoryBytes > 1_000_000, "memory counts at least the 1.2 MB of weights");
  });

  test("stream token texts concatenate to the decoded ids", async () => {
    const tokens: Token[] = [];
    for await (const token of model.generate("Once upon a time", { ...GREEDY, maxTokens: 40 })) tokens.push(token);
    assert.equal(tokens.length, 40);
    const text = tokens.map((t) => t.text).join("");
    assert.equal(text, model.decode(tokens.map((t) => t.id)));
  });

  test("batchGenerate of 4 prompts equals 4 single greedy generate calls", async () => {
    const batch = await model.batchGenerate(PROMPTS, { ...GREEDY, maxTokens: 30 });
    assert.equal(batch.length, PROMPTS.length);
    assert.equal(model.metrics().generatedTokens, batch.reduce((sum, r) => sum + r.tokens.length, 0));
    for (const [i, prompt] of PROMPTS.entries()) {
      const single = await model.generateText(prompt, { ...GREEDY, maxTokens: 30 });
      assert.equal(batch[i]!.error, undefined);
      assert.equal(batch[i]!.text, single.text, `prompt ${i}: ${prompt}`);
      assert.deepEqual(
        batch[i]!.tokens.map((t) => t.id),
        single.tokens.map((t) => t.id),
      );
      assert.equal(batch[i]!.finishReason, single.finishReason);
    }
  });

  test("more prompts than slots run in waves with the same results", async () => {
    const six = [...PROMPTS, "The sun", "Tom had"];
    const batch = await model.batchGenerate(six, { ...GREEDY, maxTokens: 12 });
    for (const [i, prompt] of six.entries()) {
      assert.equal(batch[i]!.text, (await model.generateText(prompt, { ...GREEDY, maxTokens: 12 })).text);
    }
  });

  test("batch results honour stop strings per sequence", async () => {
    const batch = await model.batchGenerate(PROMPTS, { ...GREEDY, maxTokens: 60, stopStrings: ["."] });
    for (const [i, prompt] of PROMPTS.entries()) {
      const full = await model.generateText(prompt, { ...GREEDY, maxTokens: 60 });
      const cut = full.text.indexOf(".");
      assert.ok(cut >= 0, `greedy continuation of "${prompt}" has a period`);
      assert.equal(batch[i]!.text, full.text.slice(0, cut));
      assert.equal(batch[i]!.finishReason, "stop");
    }
  });

  test("classify: the greedy next token and full-vocabulary logits whose argmax it is", async () => {
    const [result] = await model.classify(["Once upon a time"], { logits: true });
    const greedy = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 1 });
    assert.ok(result?.logits);
    assert.equal(result.logits.length, model.info().vocabSize);
    assert.equal(result.logits.length, 512);
    let argmax = 0;
    for (let i = 1; i < result.logits.length; i++) if (result.logits[i]! > result.logits[argmax]!) argmax = i;
    assert.equal(result.token.id, argmax);
    assert.equal(result.token.id, greedy.tokens[0]!.id);
    assert.equal(result.token.text, greedy.tokens[0]!.text);
  });

  test("classify of several prompts matches classify of each alone", async () => {
    const together = await model.classify(PROMPTS, { logits: true });
    for (const [i, prompt] of PROMPTS.entries()) {
      const [alone] = await model.classify([prompt], { logits: true });
      assert.equal(together[i]!.token.id, alone!.token.id);
      assert.ok(maxAbsDiff(together[i]!.logits!, alone!.logits!) < 1e-3);
    }
  });

  test("seeded sampling is reproducible and the seed matters", async () => {
    const options = { temperature: 1, topK: 0, topP: 1, minP: 0, maxTokens: 40 };
    const a = await model.generateText("Once", { ...options, seed: 1234 });
    const b = await model.generateText("Once", { ...options, seed: 1234 });
    assert.deepEqual(
      a.tokens.map((t) => t.id),
      b.tokens.map((t) => t.id),
    );
    const others = await Promise.all([1, 2, 3].map((seed) => model.generateText("Once", { ...options, seed })));
    assert.ok(
      others.some((o) => o.text !== a.text),
      "different seeds give a different text",
    );
    const greedy = await model.generateText("Once", { ...GREEDY, maxTokens: 40 });
    const heavilyPenalized = await model.generateText("Once", { ...GREEDY, maxTokens: 40, repeatPenalty: 5 });
    assert.notEqual(heavilyPenalized.text, greedy.text, "repeatPenalty changes greedy output");
  });

  test("maxTokens and stop strings", async () => {
    const five = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 5 });
    assert.equal(five.tokens.length, 5);
    assert.equal(five.finishReason, "length");
    const full = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 50 });
    const stop = "Lily";
    const at = full.text.indexOf(stop);
    assert.ok(at > 0, "the greedy text names Lily");
    const stopped = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 50, stopStrings: [stop] });
    assert.equal(stopped.text, full.text.slice(0, at));
    assert.equal(stopped.finishReason, "stop");
  });

  test("stop tokens end generation without being emitted", async () => {
    const full = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 20 });
    const stopId = full.tokens[5]!.id;
    const firstAt = full.tokens.findIndex((t) => t.id === stopId);
    const stopped = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 20, stopTokens: [stopId] });
    assert.deepEqual(
      stopped.tokens.map((t) => t.id),
      full.tokens.slice(0, firstAt).map((t) => t.id),
    );
    assert.equal(stopped.finishReason, "stop");
  });

  test("abort mid-stream throws ABORTED; the next call works and is unaffected", async () => {
    const reference = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 20 });
    const controller = new AbortController();
    let seen = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of model.generate("Once upon a time", { ...GREEDY, signal: controller.signal })) {
          if (++seen === 3) controller.abort();
        }
      })(),
      (error: unknown) => isInferenceError(error, "ABORTED"),
    );
    assert.equal(seen, 3);
    assert.ok(isInferenceError(model.err(), "ABORTED"));
    const again = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 20 });
    assert.equal(again.text, reference.text);
    assert.equal(model.err(), undefined);
    const aborted = await model.generateText("Once", { signal: AbortSignal.abort() });
    assert.equal(aborted.finishReason, "abort");
  });

  test("the end of the context finishes with 'length'", async () => {
    const result = await model.generateText("Once", { ...GREEDY, ignoreEos: true });
    assert.equal(result.finishReason, "length");
    assert.equal(result.metrics.promptTokens + result.tokens.length, model.info().contextLength);
  });

  test("a prompt longer than the context is CONTEXT_OVERFLOW and the model stays usable", async () => {
    const tooLong = "Once upon a time ".repeat(200);
    await assert.rejects(model.generateText(tooLong), (error: unknown) => isInferenceError(error, "CONTEXT_OVERFLOW"));
    const batch = await model.batchGenerate([tooLong, "Once"], { ...GREEDY, maxTokens: 5 });
    assert.equal(batch[0]!.finishReason, "error");
    assert.ok(isInferenceError(batch[0]!.error, "CONTEXT_OVERFLOW"));
    assert.equal(batch[1]!.tokens.length, 5, "the other prompt of the batch is unaffected");
    assert.equal((await model.generateText("Once", { ...GREEDY, maxTokens: 5 })).tokens.length, 5);
  });

  test("tokenizer: encode adds BOS, decode round-trips, bad ids are INVALID_OPTION", () => {
    const ids = model.encode("Once upon a time");
    assert.equal(ids[0], 1, "BOS first");
    assert.deepEqual(model.encode("Once upon a time", { addSpecialTokens: false }), ids.slice(1));
    assert.equal(model.decode(ids, { skipSpecialTokens: true }).trim(), "Once upon a time");
    assert.throws(() => model.decode([1, 99999]), (error: unknown) => isInferenceError(error, "INVALID_OPTION"));
    assert.throws(() => model.decode([-1]), (error: unknown) => isInferenceError(error, "INVALID_OPTION"));
  });

  test("chat templates: none in this model, a given one renders and drives chat", async () => {
    assert.throws(
      () => model.applyChatTemplate([{ role: "user", content: "hi" }]),
      (error: unknown) => isInferenceError(error, "NO_CHAT_TEMPLATE"),
    );
    const chatTemplate = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
    const rendered = model.applyChatTemplate([{ role: "user", content: "Once upon a time" }], { chatTemplate });
    assert.equal(rendered, "<s>Once upon a time");
    const chat = await model.chatText([{ role: "user", content: "Once upon a time" }], { ...GREEDY, maxTokens: 10, chatTemplate });
    const plain = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 10 });
    assert.equal(chat.text, plain.text, "the rendered <s> is parsed as BOS, not doubled");
  });

  test("a runaway chat template (huge loops, deep nesting, huge strings) fails fast with INVALID_OPTION", async () => {
    await assertRunawayTemplatesFail(model, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
  });

  test("JSON schema and GBNF grammars constrain the output", async () => {
    const answer = await model.generateText("Once", { ...GREEDY, jsonSchema: { type: "string", enum: ["yes", "no"] } });
    assert.ok(['"yes"', '"no"'].includes(answer.text), answer.text);
    assert.equal(answer.finishReason, "stop");
    const object = await model.generateText("Once", {
      ...GREEDY,
      maxTokens: 60,
      jsonSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
    });
    const parsed = JSON.parse(object.text) as { n: unknown };
    assert.ok(Number.isInteger(parsed.n), object.text);
    const gbnf = await model.generateText("Once", { ...GREEDY, grammar: 'root ::= "cat" | "dog"' });
    assert.ok(["cat", "dog"].includes(gbnf.text), gbnf.text);
    await assert.rejects(
      model.generateText("Once", { grammar: "root ::= (" }),
      (error: unknown) => isInferenceError(error, "INVALID_OPTION"),
    );
  });

  test("embeddings: one unit vector per text, deterministic, text-dependent", async () => {
    const [a, b, a2] = await model.embed(["Once upon a time", "The dog barked", "Once upon a time"]);
    assert.equal(a!.length, model.info().hiddenSize);
    assert.ok(Math.abs(Math.hypot(...a!) - 1) < 1e-5);
    assert.deepEqual(a, a2);
    assert.ok(maxAbsDiff(a!, b!) > 1e-3);
  });

  test("kvType: f32 gives the published text too; q8_0 needs head sizes this model lacks", async () => {
    const expected = readFileSync(STORIES_EXPECTED, "utf8").replace(/\n$/, "");
    const f32 = await loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1, kvType: "f32" });
    try {
      assert.equal((await f32.generateText("", { ...GREEDY, maxTokens: 200 })).text, expected);
    } finally {
      await f32.close();
    }
    // stories260K's heads have 8 dimensions; a q8_0 cache stores blocks of 32.
    await assert.rejects(loadModel(STORIES_GGUF, { ...TEST_LOAD, kvType: "q8_0" }), (error: unknown) => {
      assert.ok(isInferenceError(error, "INVALID_OPTION") && error.message.includes("kvType"), String(error));
      return true;
    });
  });

  test("batchSize: a long prompt in batches of 8 gives the same greedy text; the context takes that size", async () => {
    const prompt = "Once upon a time there was a little girl named Lily. She loved to play outside. ".repeat(3);
    const small = (await loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1, batchSize: 8 })) as LlamaCppModel;
    try {
      assert.ok(small.encode(prompt).length > 3 * 8, "the prompt spans several batches");
      assert.equal((small as unknown as { parts: { context: { batchSize: number } } }).parts.context.batchSize, 8);
      const greedy = { ...GREEDY, maxTokens: 40 };
      assert.equal((await small.generateText(prompt, greedy)).text, (await model.generateText(prompt, greedy)).text);
    } finally {
      await small.close();
    }
  });

  test("info and capabilities", () => {
    assert.deepEqual(
      { ...model.info(), contextLength: 0 },
      {
        architecture: "llama",
        vocabSize: 512,
        numLayers: 5,
        hiddenSize: 64,
        contextLength: 0,
        quantBits: 32,
        quantGroup: 0,
        format: "gguf",
        parameters: model.info().parameters,
        trainedContextLength: 2048,
        warnings: [],
      },
    );
    assert.ok(model.info().contextLength >= TEST_LOAD.contextLength);
    assert.equal(model.modelType, "llama");
    assert.equal(model.backend, "llama_cpp");
    assert.equal(model.threads, TEST_LOAD.threads);
    const capabilities = capabilitiesOf(model as TextModel);
    for (const id of ["tokenizer", "embeddings", "grammar", "speculative", "lora.inference"] as const) {
      assert.equal(capabilities[id], "supported", id);
    }
  });
});

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}
