/**
 * Stop strings and maxTokens are applied once, by BaseTextModel, on every
 * path: the backend's stream and batch only decode, and decode no token past
 * the one that completes a stop string or reaches maxTokens. The toy model's
 * metrics count the tokens its backend decoded.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type BatchResult, type Token } from "../src/index.js";
import { assertCode, spanningStop } from "../src/testing/index.js";
import { FakeModel } from "./fake-backend.js";

const GREEDY = { temperature: 0, maxTokens: 24 }; // the toy model meets no EOS: always 24 tokens

/** A stop string across two tokens from token `from` on; the toy model's text always has one. */
function span(tokens: Token[], from: number): { stop: string; before: string; decoded: number } {
  const found = spanningStop(tokens, from);
  assert.ok(found, `no stop string spans two tokens of ${JSON.stringify(tokens.map((t) => t.text).join(""))}`);
  return found;
}

describe("stop strings and maxTokens, applied once by BaseTextModel", () => {
  it("generate: the stream stops at the token that completes the stop string, nothing decoded after", async () => {
    const model = new FakeModel();
    const full = await model.generateText("once", GREEDY);
    assert.equal(full.tokens.length, 24);
    const stop = span(full.tokens, 5);
    const streamed: Token[] = [];
    for await (const token of model.generate("once", { ...GREEDY, stopStrings: [stop.stop] })) streamed.push(token);
    assert.equal(streamed.map((t) => t.text).join(""), stop.before);
    assert.equal(model.metrics().generatedTokens, stop.decoded);
    const result = await model.generateText("once", { ...GREEDY, stopStrings: [stop.stop] });
    assert.deepEqual([result.text, result.finishReason], [stop.before, "stop"]);
    // maxTokens: exactly that many decoded.
    await model.generateText("once", { ...GREEDY, maxTokens: 7 });
    assert.equal(model.metrics().generatedTokens, 7);
    await model.close();
  });

  it("batchGenerate: each prompt's own stop strings (or the batch's), ended and reported once, nothing decoded after", async () => {
    const model = new FakeModel();
    const prompts = ["once", "the dog", "a cat"];
    const fulls = await Promise.all(prompts.map((p) => model.generateText(p, GREEDY)));
    const own = span(fulls[0]!.tokens, 3);
    const shared = span(fulls[1]!.tokens, 6);
    assert.equal(fulls[2]!.text.includes(shared.stop), false, "the third prompt must not meet the batch's stop string");
    const streamed = ["", "", ""];
    const finished: [number, BatchResult][] = [];
    const results = await model.batchGenerate(prompts, {
      ...GREEDY,
      stopStrings: [shared.stop],
      // The first prompt's own; the second has none of its own (the batch's apply); the third opts out with [].
      promptStopStrings: [[own.stop], undefined, []],
      onToken: (index, token) => (streamed[index] += token.text),
      onFinish: (index, result) => finished.push([index, result]),
    });
    assert.deepEqual(
      results.map((r) => [r.text, r.finishReason]),
      [
        [own.before, "stop"],
        [shared.before, "stop"],
        [fulls[2]!.text, "length"],
      ],
    );
    assert.deepEqual(streamed, results.map((r) => r.text), "onToken passed on a stop string's text");
    assert.deepEqual(
      finished.sort(([a], [b]) => a - b),
      results.map((r, i) => [i, r]),
      "onFinish once per prompt, with its result",
    );
    assert.equal(model.metrics().generatedTokens, own.decoded + shared.decoded + 24, "tokens decoded past a stop");
    await model.close();
  });

  it("batchGenerate refuses a malformed promptStopStrings before any work", async () => {
    const model = new FakeModel();
    for (const bad of ["x", [["ok"], [""]], [5], [["a"], ["b"], ["c"]]]) {
      await assertCode(model.batchGenerate(["ab", "cd"], { promptStopStrings: bad as never }), "INVALID_OPTION");
    }
    await model.close();
  });
});
