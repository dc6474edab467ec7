/**
 * logprobs on the llama_cpp backend: each token's log-probability and most
 * likely alternatives, from the model's raw distribution at that step. The
 * references are independent of the logprobs path: the normal decode path's
 * greedy tokens, llama2.c's published output, classify's full-vocabulary
 * logits, and the wasm engine's own logprobs on the same random GGUF file.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  capabilitiesOf,
  isInferenceError,
  loadModel,
  type LogitsSummaryPayload,
  type ProbeEvent,
  type TextModel,
  type Token,
} from "@infer/core";
import "../src/index.js";
import type { LlamaCppModel } from "../src/index.js";
import { LogitSampler } from "../src/logit-sampler.js";
import { skipWithoutStories, STORIES_EXPECTED, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";
import { loadWasmKit, wasmBuildMissing } from "./wasm-link.js";

const GREEDY = { temperature: 0, ignoreEos: true } as const;
const PROMPTS = ["Once upon a time", "The dog", "Lily and Ben", "One day, a little"];

/** log softmax of `logits` at `id`, in double precision. */
function logSoftmaxAt(logits: Float32Array, id: number): number {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  return logits[id]! - max - Math.log(sum);
}

/** The shape every greedy token with `logprobs: count` must have. */
function assertGreedyLogprobs(model: TextModel & { decode(ids: number[]): string }, tokens: Token[], count: number): void {
  for (const [step, token] of tokens.entries()) {
    const where = `step ${step}`;
    assert.ok(token.logprob !== undefined && token.logprob <= 0, `${where}: logprob ${token.logprob}`);
    const alternatives = token.topLogprobs!;
    assert.equal(alternatives.length, count, `${where}: as many alternatives as asked`);
    assert.equal(alternatives[0]!.id, token.id, `${where}: greedy picks the most likely token`);
    assert.equal(alternatives[0]!.logprob, token.logprob, `${where}: the chosen token's entry repeats its logprob`);
    for (let i = 1; i < alternatives.length; i++) {
      assert.ok(alternatives[i]!.logprob <= alternatives[i - 1]!.logprob, `${where}: most likely first`);
    }
    const mass = alternatives.reduce((sum, alt) => sum + Math.exp(alt.logprob), 0);
    assert.ok(mass <= 1 + 1e-6, `${where}: probabilities sum to ${mass} > 1`);
    for (const alt of alternatives) assert.equal(alt.text, model.decode([alt.id]), `${where}: text of ${alt.id}`);
  }
}

describe("llama_cpp logprobs on stories260K", { skip: skipWithoutStories }, () => {
  let model: LlamaCppModel;
  const events: ProbeEvent[] = [];

  before(async () => {
    model = (await loadModel(STORIES_GGUF, { ...TEST_LOAD, probe: (event) => events.push(event) })) as LlamaCppModel;
  });
  after(async () => {
    await model?.close();
  });

  test("the capability is declared", () => {
    assert.equal(capabilitiesOf(model)["probe.logits"], "supported");
  });

  test("greedy tokens with logprobs equal llama2.c's published output and the normal path's", async () => {
    const expected = readFileSync(STORIES_EXPECTED, "utf8").replace(/\n$/, "");
    const scored = await model.generateText("", { temperature: 0, maxTokens: 200, logprobs: 2 });
    assert.equal(scored.text, expected);
    assert.equal(scored.finishReason, "length");
    assertGreedyLogprobs(model, scored.tokens, 2);

    for (const prompt of PROMPTS) {
      const plain = await model.generateText(prompt, { ...GREEDY, maxTokens: 40 });
      const withLogprobs = await model.generateText(prompt, { ...GREEDY, maxTokens: 40, logprobs: 5 });
      assert.deepEqual(
        withLogprobs.tokens.map((t) => t.id),
        plain.tokens.map((t) => t.id),
        prompt,
      );
      assert.equal(withLogprobs.text, plain.text);
      assert.equal(plain.tokens[0]!.logprob, undefined, "the normal path attaches nothing");
      assertGreedyLogprobs(model, withLogprobs.tokens, 5);
    }
  });

  test("greedy with a repeat penalty picks llama.cpp's own penalized tokens", async () => {
    for (const [repeatPenalty, repeatLastN] of [
      [1.3, 64],
      [1.8, 16],
      [0.7, 8],
    ] as const) {
      const options = { ...GREEDY, repeatPenalty, repeatLastN, maxTokens: 60 };
      const plain = await model.generateText("The dog", options);
      const withLogprobs = await model.generateText("The dog", { ...options, logprobs: 0 });
      assert.deepEqual(withLogprobs.tokens.map((t) => t.id), plain.tokens.map((t) => t.id), `penalty ${repeatPenalty}`);
    }
  });

  test("the first token's logprob is log softmax of classify's logits", async () => {
    for (const prompt of PROMPTS) {
      const [classified] = await model.classify([prompt], { logits: true });
      const result = await model.generateText(prompt, { ...GREEDY, maxTokens: 3, logprobs: 4 });
      const logits = classified!.logits!;
      const first = result.tokens[0]!;
      assert.equal(first.id, classified!.token.id);
      assert.ok(Math.abs(first.logprob! - logSoftmaxAt(logits, first.id)) < 1e-3, `${prompt}: ${first.logprob}`);
      for (const alt of first.topLogprobs!) {
        assert.ok(Math.abs(alt.logprob - logSoftmaxAt(logits, alt.id)) < 1e-3, `${prompt}: alternative ${alt.id}`);
      }
    }
  });

  test("logprobs: 0 gives each token's logprob and no alternatives; the stream carries them too", async () => {
    const tokens: Token[] = [];
    for await (const token of model.generate("The dog", { ...GREEDY, maxTokens: 10, logprobs: 0 })) tokens.push(token);
    assert.equal(tokens.length, 10);
    for (const token of tokens) {
      assert.ok(typeof token.logprob === "number" && token.logprob <= 0);
      assert.equal(token.topLogprobs, undefined);
    }
  });

  test("chat with logprobs: the normal path's greedy tokens, scored", async () => {
    const chatTemplate = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
    const messages = [{ role: "user" as const, content: "Lily and Ben" }];
    const plain = await model.chatText(messages, { ...GREEDY, maxTokens: 12, chatTemplate });
    const scored = await model.chatText(messages, { ...GREEDY, maxTokens: 12, chatTemplate, logprobs: 2 });
    assert.deepEqual(scored.tokens.map((t) => t.id), plain.tokens.map((t) => t.id));
    assertGreedyLogprobs(model, scored.tokens, 2);
  });

  test("batch with logprobs equals single calls, and onToken sees the scored tokens", async () => {
    const streamed: Token[][] = PROMPTS.map(() => []);
    const batch = await model.batchGenerate(PROMPTS, {
      ...GREEDY,
      maxTokens: 16,
      logprobs: 3,
      onToken: (index, token) => streamed[index]!.push(token),
    });
    for (const [i, prompt] of PROMPTS.entries()) {
      const single = await model.generateText(prompt, { ...GREEDY, maxTokens: 16, logprobs: 3 });
      assert.equal(batch[i]!.error, undefined);
      assert.deepEqual(batch[i]!.tokens.map((t) => t.id), single.tokens.map((t) => t.id), prompt);
      assert.deepEqual(streamed[i], batch[i]!.tokens, `${prompt}: onToken got the result's tokens`);
      for (const [step, token] of batch[i]!.tokens.entries()) {
        const reference = single.tokens[step]!;
        // One llama.cpp batch for four sequences may round differently from one alone.
        assert.ok(Math.abs(token.logprob! - reference.logprob!) < 1e-3, `${prompt} step ${step}`);
        assert.deepEqual(token.topLogprobs!.map((alt) => alt.id), reference.topLogprobs!.map((alt) => alt.id));
      }
      assertGreedyLogprobs(model, batch[i]!.tokens, 3);
    }
  });

  test("sampling draws within the filters, repeats itself with a seed, and scores the unfiltered distribution", async () => {
    const options = { temperature: 1.5, topK: 3, topP: 1, minP: 0, seed: 11, maxTokens: 40, logprobs: 3, ignoreEos: true };
    const first = await model.generateText("Once upon a time", options);
    const again = await model.generateText("Once upon a time", options);
    assert.deepEqual(again.tokens.map((t) => t.id), first.tokens.map((t) => t.id), "same seed, same tokens");
    // The second call reuses the cached prompt and evaluates only its last token, which rounds a little differently.
    again.tokens.forEach((token, step) => assert.ok(Math.abs(token.logprob! - first.tokens[step]!.logprob!) < 1e-3));
    const other = await model.generateText("Once upon a time", { ...options, seed: 12 });
    assert.notDeepEqual(other.tokens.map((t) => t.id), first.tokens.map((t) => t.id), "another seed draws differently");
    let notTop = 0;
    for (const token of first.tokens) {
      const alternatives = token.topLogprobs!;
      const entry = alternatives.find((alt) => alt.id === token.id);
      assert.ok(entry, `token ${token.id} is one of the 3 most likely (topK 3)`);
      assert.equal(entry.logprob, token.logprob);
      // Temperature and top-k shape the draw, not the reported distribution.
      const mass = alternatives.reduce((sum, alt) => sum + Math.exp(alt.logprob), 0);
      assert.ok(mass < 1, "the 3 alternatives do not take all the probability");
      if (token.id !== alternatives[0]!.id) notTop++;
    }
    assert.ok(notTop > 0, "at temperature 1.5 some draws are not the most likely token");
  });

  test("abort mid-stream and the end of the context behave as on the normal path", async () => {
    const controller = new AbortController();
    const seen: Token[] = [];
    await assert.rejects(
      (async () => {
        for await (const token of model.generate("The dog", { ...GREEDY, logprobs: 1, signal: controller.signal })) {
          seen.push(token);
          if (seen.length === 3) controller.abort();
        }
      })(),
      (error) => isInferenceError(error, "ABORTED"),
    );
    assert.equal(seen.length, 3);
    const plain = await model.generateText("The dog", GREEDY);
    const scored = await model.generateText("The dog", { ...GREEDY, logprobs: 1 });
    assert.equal(scored.finishReason, "length");
    assert.deepEqual(scored.tokens.map((t) => t.id), plain.tokens.map((t) => t.id), "same tokens up to the context's end");
  });

  test("each logprobs step emits a logits probe whose top id is the greedy token", async () => {
    events.length = 0;
    const result = await model.generateText("Lily and Ben", { ...GREEDY, maxTokens: 6, logprobs: 1 });
    const summaries = events.filter((e) => e.kind === "logits").map((e) => e.payload as LogitsSummaryPayload);
    assert.equal(summaries.length, 6);
    summaries.forEach((summary, step) => {
      assert.equal(summary.topIds[0], result.tokens[step]!.id);
      assert.equal(summary.vocabSize, model.info().vocabSize);
    });
  });

  test("logprobs with a grammar is refused with UNSUPPORTED", async () => {
    await assert.rejects(
      model.generateText("The dog", { maxTokens: 4, logprobs: 2, grammar: 'root ::= "a"' }),
      (error) => isInferenceError(error, "UNSUPPORTED") && /logprobs/.test(error.message),
    );
    const [result] = await model.batchGenerate(["The dog"], { maxTokens: 4, logprobs: 2, jsonSchema: { type: "string" } }).catch(
      (error: unknown) => [{ error }],
    );
    assert.ok(isInferenceError(result!.error, "UNSUPPORTED"));
  });
});

describe("llama_cpp logprobs on a random GGUF model agree with the wasm engine's", { skip: wasmBuildMissing ?? false }, () => {
  let dir: string;
  let path: string;

  before(async () => {
    const kit = await loadWasmKit();
    dir = await mkdtemp(join(tmpdir(), "infer-logprobs-"));
    path = join(dir, "random-qwen2.gguf");
    await kit.writeRandomGguf(path, { architecture: "qwen2", seed: 5 });
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("same greedy tokens and logprobs within llama.cpp's F16 rounding", async () => {
    const prompt = "Hello there, the answer is in the";
    const options = { ...GREEDY, maxTokens: 8, logprobs: 4 };
    const llama = await loadModel(path, { ...TEST_LOAD, parallelSlots: 1 });
    const wasm = await loadModel(path, { backend: "wasm", threads: 1, contextLength: 256, parallelSlots: 1 });
    try {
      assert.equal(capabilitiesOf(llama)["probe.logits"], "supported");
      const ours = await llama.generateText(prompt, options);
      const theirs = await wasm.generateText(prompt, options);
      assertGreedyLogprobs(llama as LlamaCppModel, ours.tokens, 4);
      const plain = await llama.generateText(prompt, { ...GREEDY, maxTokens: 8 });
      assert.deepEqual(ours.tokens.map((t) => t.id), plain.tokens.map((t) => t.id));
      let compared = 0;
      for (const [step, token] of ours.tokens.entries()) {
        const reference = theirs.tokens[step]!;
        // Past a step where the engines chose differently (a near-tie) the sequences differ.
        if (reference.id !== token.id) break;
        // Measured: at most 1.5e-4 apart (llama.cpp's F16 flash attention vs float32).
        assert.ok(Math.abs(token.logprob! - reference.logprob!) < 1e-3, `step ${step}: ${token.logprob} vs ${reference.logprob}`);
        compared++;
      }
      assert.ok(compared > 0, "the engines agree at least on the first token of this file");
    } finally {
      await llama.close();
      await wasm.close();
    }
  });
});

describe("the logprobs path's sampler", () => {
  /** Draw frequencies of 4000 samples of `probs` (as logits) with these filters. */
  function frequencies(probs: number[], settings: Partial<ConstructorParameters<typeof LogitSampler>[0]>): number[] {
    const sampler = new LogitSampler({
      temperature: 1,
      topK: 0,
      topP: 1,
      minP: 0,
      repeatPenalty: 1,
      repeatLastN: 0,
      seed: 9,
      ...settings,
    });
    const logits = Float32Array.from(probs, Math.log);
    const counts = probs.map(() => 0);
    for (let i = 0; i < 4000; i++) counts[sampler.sample(logits, [])]!++;
    return counts.map((c) => c / 4000);
  }

  function assertNear(actual: number[], expected: number[]): void {
    actual.forEach((f, i) => assert.ok(Math.abs(f - expected[i]!) < 0.03, `id ${i}: ${actual.join(", ")} vs ${expected.join(", ")}`));
  }

  const PROBS = [0.5, 0.25, 0.15, 0.1];

  test("draws follow the filtered, tempered distribution", () => {
    assertNear(frequencies(PROBS, {}), PROBS);
    assertNear(frequencies(PROBS, { topK: 2 }), [2 / 3, 1 / 3, 0, 0]);
    // top-p 0.7: 0.5 alone is short of it, 0.5 + 0.25 reaches it.
    assertNear(frequencies(PROBS, { topP: 0.7 }), [2 / 3, 1 / 3, 0, 0]);
    // min-p 0.25 keeps p >= 0.125: the first three.
    assertNear(frequencies(PROBS, { minP: 0.25 }), [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0]);
    // Temperature 2 draws in proportion to sqrt(p).
    const roots = PROBS.map(Math.sqrt);
    const total = roots.reduce((a, b) => a + b, 0);
    assertNear(frequencies(PROBS, { temperature: 2 }), roots.map((r) => r / total));
    assert.deepEqual(frequencies(PROBS, { temperature: 0 }), [1, 0, 0, 0]);
  });

  test("the repeat penalty divides positive logits and multiplies negative ones of recent tokens", () => {
    const sampler = new LogitSampler({ temperature: 0, topK: 0, topP: 1, minP: 0, repeatPenalty: 2, repeatLastN: 2, seed: 1 });
    // Token 0 (logit 3) penalized to 1.5 loses to token 1 (2); token 2 (-1 -> -2) stays last.
    assert.equal(sampler.sample(Float32Array.of(3, 2, -1), [0]), 1);
    assert.equal(sampler.sample(Float32Array.of(3, 2, -1), [0, 1]), 0, "both penalized: 1.5 vs 1");
    assert.equal(sampler.sample(Float32Array.of(3, 2, -1), [0, 2, 2]), 0, "only the last repeatLastN ids count");
  });
});
