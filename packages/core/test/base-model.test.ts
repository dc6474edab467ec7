import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_GENERATE_OPTIONS, isInferenceError, type Token } from "../src/index.js";
import { assertCode } from "../src/testing/index.js";
import { EOS, FakeModel, sample, VOCAB } from "./fake-backend.js";


async function collect(stream: AsyncIterable<Token>): Promise<Token[]> {
  const out: Token[] = [];
  for await (const token of stream) out.push(token);
  return out;
}

/** Greedy continuation computed straight from the toy model's logits, bypassing BaseTextModel. */
function referenceGreedy(model: FakeModel, prompt: string, count: number): number[] {
  const ids = model.encode(prompt);
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const id = sample(model.nextLogits(ids, i), { temperature: 0 }, Math.random);
    if (id === EOS) break;
    ids.push(id);
    out.push(id);
  }
  return out;
}

describe("generation through BaseTextModel", () => {
  it("greedy output equals the directly computed argmax chain", async () => {
    const model = new FakeModel();
    const result = await model.generateText("hello", { temperature: 0, maxTokens: 12 });
    assert.deepEqual(
      result.tokens.map((t) => t.id),
      referenceGreedy(model, "hello", 12),
    );
    assert.equal(result.text, model.decode(referenceGreedy(model, "hello", 12)));
    assert.equal(result.finishReason, "length");
  });

  it("EOS ends with reason stop and is not emitted; ignoreEos keeps going", async () => {
    const model = new FakeModel("fake", { eosAfter: 4 });
    const result = await model.generateText("hi", { temperature: 0, maxTokens: 10 });
    assert.equal(result.tokens.length, 4);
    assert.equal(result.finishReason, "stop");
    const past = await model.generateText("hi", { temperature: 0, maxTokens: 10, ignoreEos: true });
    assert.equal(past.tokens.length, 10);
    assert.equal(past.tokens[4]!.id, EOS);
    assert.equal(past.finishReason, "length");
  });

  it("a stop token ends the sequence without being emitted", async () => {
    const model = new FakeModel();
    const free = await model.generateText("abc", { temperature: 0, maxTokens: 12 });
    const stopId = free.tokens[5]!.id;
    const firstAt = free.tokens.findIndex((t) => t.id === stopId);
    const result = await model.generateText("abc", { temperature: 0, maxTokens: 12, stopTokens: [stopId] });
    assert.deepEqual(result.tokens, free.tokens.slice(0, firstAt));
    assert.equal(result.finishReason, "stop");
  });

  it("a stop string spanning tokens cuts the text before it", async () => {
    const model = new FakeModel();
    const free = await model.generateText("abc", { temperature: 0, maxTokens: 20 });
    const stop = free.text.slice(7, 10); // three single-character tokens
    const result = await model.generateText("abc", { temperature: 0, maxTokens: 20, stopStrings: [stop, "@@@"] });
    assert.equal(result.text, free.text.slice(0, free.text.indexOf(stop)));
    assert.equal(result.finishReason, "stop");
  });

  it("the end of the context ends with reason length", async () => {
    const model = new FakeModel("fake", { contextLength: 12 });
    const result = await model.generateText("abcde", { temperature: 0 });
    assert.equal(result.tokens.length, 12 - 6); // BOS + 5 prompt tokens
    assert.equal(result.finishReason, "length");
  });

  it("chat renders the messages and validates them", async () => {
    const model = new FakeModel();
    const messages = [{ role: "user" as const, content: "hi" }];
    const chat = await model.chatText(messages, { temperature: 0, maxTokens: 5 });
    const direct = await model.generateText(model.applyChatTemplate(messages), { temperature: 0, maxTokens: 5 });
    assert.deepEqual(chat.tokens, direct.tokens);
    await assertCode(model.chatText([], {}), "INVALID_OPTION");
    const badRole = await assertCode(model.chatText([{ role: "robot", content: "x" }] as never), "INVALID_OPTION");
    assert.match(badRole.message, /messages\[0\]\.role/);
    const badContent = await assertCode(model.chatText([{ role: "user", content: 3 }] as never), "INVALID_OPTION");
    assert.match(badContent.message, /messages\[0\]\.content/);
    await assertCode(model.chatText([{ role: "user", content: "#notemplate" }]), "NO_CHAT_TEMPLATE");
  });

  it("classify and batchGenerate accept empty input and reject non-string prompts", async () => {
    const model = new FakeModel();
    assert.deepEqual(await model.classify([]), []);
    assert.deepEqual(await model.batchGenerate([]), []);
    await assertCode(model.classify(["a", 1] as never), "INVALID_OPTION");
    await assertCode(model.batchGenerate("abc" as never), "INVALID_OPTION");
  });
});

describe("errors and recovery", () => {
  it("backend errors keep their codes; other throws become INTERNAL", async () => {
    const model = new FakeModel("fake", { contextLength: 16 });
    await assertCode(model.generateText("#unsupported"), "UNSUPPORTED");
    assert.ok(isInferenceError(model.err(), "UNSUPPORTED"));
    const overflow = await assertCode(model.generateText("a very long prompt indeed"), "CONTEXT_OVERFLOW");
    assert.match(overflow.message, /context of 16/);
    const crash = await assertCode(collect(model.generate("#crash")), "INTERNAL");
    assert.match(crash.message, /fake backend crashed/);
    assert.equal(model.err(), crash);
  });

  it("a failed call leaves the model usable and err() is reset by the next success", async () => {
    const model = new FakeModel();
    const good = await model.generateText("ok", { temperature: 0, maxTokens: 4 });
    await assertCode(model.generateText("#unsupported"), "UNSUPPORTED");
    assert.ok(model.err());
    const again = await model.generateText("ok", { temperature: 0, maxTokens: 4 });
    assert.deepEqual(again.tokens, good.tokens);
    assert.equal(model.err(), undefined);
    await assertCode(model.classify(["x"], { topP: 5 }), "INVALID_OPTION");
    assert.ok(model.err());
    await model.classify(["x"]);
    assert.equal(model.err(), undefined);
  });

  it("one failing prompt does not sink the batch", async () => {
    const model = new FakeModel();
    const results = await model.batchGenerate(["ab", "#unsupported", "cd"], { temperature: 0, maxTokens: 3 });
    assert.deepEqual(
      results.map((r) => r.finishReason),
      ["length", "error", "length"],
    );
    assert.ok(isInferenceError(results[1]!.error, "UNSUPPORTED"));
    assert.deepEqual(results[2]!.tokens, (await model.generateText("cd", { temperature: 0, maxTokens: 3 })).tokens);
  });

  it("generateText with an aborted signal resolves with reason abort; err() keeps ABORTED", async () => {
    const model = new FakeModel();
    const controller = new AbortController();
    controller.abort(new Error("user pressed stop"));
    const result = await model.generateText("abc", { signal: controller.signal });
    assert.equal(result.finishReason, "abort");
    assert.deepEqual(result.tokens, []);
    assert.ok(isInferenceError(model.err(), "ABORTED"));
    assert.match(model.err()!.message, /user pressed stop/);
    const streamed = await assertCode(collect(model.generate("abc", { signal: controller.signal })), "ABORTED");
    assert.match(streamed.message, /aborted/);
    await assertCode(model.classify(["abc"], { signal: controller.signal }), "ABORTED");
  });

  it("an abort during generateText keeps the tokens produced so far", async () => {
    const model = new FakeModel("fake", { delayMs: 5 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    const partial = await model.generateText("abc", { temperature: 0, maxTokens: 1000, signal: controller.signal });
    assert.equal(partial.finishReason, "abort");
    assert.ok(partial.tokens.length > 0 && partial.tokens.length < 1000, `${partial.tokens.length} tokens`);
    assert.deepEqual(
      partial.tokens.map((t) => t.id),
      referenceGreedy(model, "abc", partial.tokens.length),
    );
    // Aborting a signal after its call resolved changes nothing for later calls.
    const later = await model.generateText("abc", { temperature: 0, maxTokens: 3 });
    assert.equal(later.finishReason, "length");
  });
});

describe("signals", () => {
  it("a value that is not a signal is INVALID_OPTION and does not lock the model", async () => {
    const model = new FakeModel();
    for (const signal of [{}, "stop", 1, { aborted: false }]) {
      await assertCode(model.generateText("a", { signal } as never), "INVALID_OPTION");
      await assertCode(collect(model.generate("a", { signal } as never)), "INVALID_OPTION");
      await assertCode(model.classify(["a"], { signal } as never), "INVALID_OPTION");
      await assertCode(model.batchGenerate(["a"], { signal } as never), "INVALID_OPTION");
    }
    const after = await model.generateText("a", { temperature: 0, maxTokens: 2 });
    assert.equal(after.tokens.length, 2);
  });

  it("a look-alike signal (another realm, a polyfill) is followed", async () => {
    const model = new FakeModel("fake", { delayMs: 2 });
    const listeners: (() => void)[] = [];
    const lookAlike = {
      aborted: false,
      reason: undefined as unknown,
      addEventListener: (_type: string, listener: () => void) => listeners.push(listener),
      removeEventListener: () => undefined,
    };
    const seen: Token[] = [];
    await assertCode(
      (async () => {
        for await (const token of model.generate("abc", { maxTokens: 100, signal: lookAlike as unknown as AbortSignal })) {
          seen.push(token);
          if (seen.length === 2) {
            lookAlike.aborted = true;
            lookAlike.reason = "polyfill abort";
            for (const listener of listeners) listener();
          }
        }
      })(),
      "ABORTED",
    );
    assert.equal(seen.length, 2);
    const pre = { ...lookAlike, aborted: true };
    assert.equal((await model.generateText("abc", { signal: pre as unknown as AbortSignal })).finishReason, "abort");
  });

  it("batchGenerate with an aborted signal resolves every prompt with reason abort", async () => {
    const model = new FakeModel();
    const controller = new AbortController();
    controller.abort();
    const results = await model.batchGenerate(["a", "b"], { signal: controller.signal });
    assert.deepEqual(results, [
      { tokens: [], text: "", finishReason: "abort" },
      { tokens: [], text: "", finishReason: "abort" },
    ]);
    assert.ok(isInferenceError(model.err(), "ABORTED"));
  });
});

describe("one call at a time", () => {
  it("concurrent calls are serialised and each gets its own answer", async () => {
    const model = new FakeModel("fake", { delayMs: 2 });
    const prompts = ["one", "two", "three", "four"];
    const results = await Promise.all([
      ...prompts.map((p) => model.generateText(p, { temperature: 0, maxTokens: 5 })),
      collect(model.generate("five", { temperature: 0, maxTokens: 5 })),
      model.batchGenerate(["six"], { temperature: 0, maxTokens: 5 }),
      model.classify(["seven"]),
    ]);
    assert.equal(model.maxActive, 1);
    for (const [i, p] of prompts.entries()) {
      const r = results[i] as { tokens: Token[] };
      assert.deepEqual(
        r.tokens.map((t) => t.id),
        referenceGreedy(model, p, 5),
      );
    }
  });

  it("a stream dropped without return() is abandoned after idleTimeoutMs; later calls run", async () => {
    const model = new FakeModel();
    const iterator = model.generate("abc", { temperature: 0, maxTokens: 50, idleTimeoutMs: 50 })[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).done, false);
    // The consumer never asks again: without the timeout this call would wait for the model forever.
    const started = performance.now();
    const later = await model.generateText("abc", { temperature: 0, maxTokens: 2 });
    assert.equal(later.tokens.length, 2);
    assert.ok(performance.now() - started >= 40, "the later call waited for the timeout");
    assert.equal(model.active, 0, "the abandoned backend stream was finished");
    const error = await assertCode(iterator.next(), "ABORTED");
    assert.match(error.message, /idleTimeoutMs \(50 ms\)/);
    await model.close();
  });

  it("idleTimeoutMs: 0 waits for the consumer however long it takes; the default is a minute", async () => {
    assert.equal(DEFAULT_GENERATE_OPTIONS.idleTimeoutMs, 60_000);
    const model = new FakeModel();
    const iterator = model.generate("abc", { temperature: 0, maxTokens: 50, idleTimeoutMs: 0 })[Symbol.asyncIterator]();
    await iterator.next();
    let laterDone = false;
    const later = model.generateText("abc", { temperature: 0, maxTokens: 2 }).then((r) => ((laterDone = true), r));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(laterDone, false, "the later call waits behind the held stream");
    assert.equal((await iterator.next()).done, false, "the slow consumer still gets its tokens");
    await iterator.return?.();
    assert.equal((await later).tokens.length, 2);
    await assertCode(Promise.resolve(model.generateText("x", { idleTimeoutMs: -1 })), "INVALID_OPTION");
  });

  it("a stream consumer that breaks early releases the model", async () => {
    const model = new FakeModel();
    for await (const token of model.generate("abc", { temperature: 0 })) {
      assert.ok(token.text.length > 0);
      break;
    }
    const next = await model.generateText("abc", { temperature: 0, maxTokens: 2 });
    assert.equal(next.tokens.length, 2);
  });
});

describe("close", () => {
  it("close during a stream ends it with CLOSED and disposes after it unwound", async () => {
    const model = new FakeModel("fake", { delayMs: 3 });
    const received: Token[] = [];
    const consuming = (async () => {
      for await (const token of model.generate("abc", { temperature: 0, maxTokens: 10_000 })) {
        received.push(token);
        if (received.length === 2) void model.close();
      }
    })();
    await assertCode(consuming, "CLOSED");
    await model.close();
    assert.equal(received.length, 2);
    assert.equal(model.disposeCount, 1);
    assert.equal(model.disposedWhileActive, false);
    assert.ok(isInferenceError(model.err(), "CLOSED"));
  });

  it("close while the backend is mid-token waits for it, then CLOSED", async () => {
    const model = new FakeModel("fake", { delayMs: 20 });
    const pending = model.generateText("abc", { temperature: 0, maxTokens: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await model.close();
    assert.equal(model.disposedWhileActive, false);
    await assertCode(pending, "CLOSED");
  });

  it("close does not hang on a stream whose consumer stopped asking for tokens", async () => {
    const model = new FakeModel();
    const iterator = model.generate("abc", { temperature: 0, maxTokens: 50 })[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).done, false);
    await model.close(); // the consumer holds the stream at a yield
    assert.equal(model.disposeCount, 1);
    assert.equal(model.active, 0, "the backend stream was not finished");
    await assertCode(iterator.next(), "CLOSED");
  });

  it("calls queued behind a running one fail with CLOSED when the model closes", async () => {
    const model = new FakeModel("fake", { delayMs: 5 });
    const first = model.generateText("a", { temperature: 0, maxTokens: 10_000 });
    const queued = model.classify(["b"]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await model.close();
    await assertCode(first, "CLOSED");
    await assertCode(queued, "CLOSED");
  });

  it("await using disposes the model", async () => {
    let outer: FakeModel | undefined;
    {
      await using model = new FakeModel();
      outer = model;
      await model.generateText("x", { maxTokens: 1 });
    }
    assert.equal(outer.isClosed, true);
    assert.equal(outer.disposeCount, 1);
  });
});

describe("the toy model itself", () => {
  it("encodes characters with BOS and decodes them back", () => {
    const model = new FakeModel();
    const ids = model.encode("Hi there!");
    assert.equal(ids[0], 0);
    assert.equal(model.decode(ids, { skipSpecialTokens: true }), "hi there!");
    assert.equal(model.decode(ids), "<s>hi there!");
    assert.equal(VOCAB.length, model.info().vocabSize);
  });
});

describe("options that need a capability", () => {
  it("jsonSchema, grammar and logprobs are refused with UNSUPPORTED by a model without grammar or logit probes", async () => {
    const model = new FakeModel();
    for (const [options, option] of [
      [{ jsonSchema: { type: "object" } }, "jsonSchema"],
      [{ grammar: 'root ::= "a"' }, "grammar"],
      [{ logprobs: 2 }, "logprobs"],
    ] as const) {
      const error = await assertCode(model.generateText("ab", { maxTokens: 2, ...options }), "UNSUPPORTED");
      assert.match(error.message, new RegExp(option));
      const batch = await assertCode(model.batchGenerate(["ab"], { maxTokens: 2, ...options }), "UNSUPPORTED");
      assert.match(batch.message, new RegExp(option));
    }
    // The model is still usable.
    assert.equal((await model.generateText("ab", { maxTokens: 2, temperature: 0 })).tokens.length, 2);
    await model.close();
  });
});

describe("batchGenerate with chat prompts and onToken", () => {
  it("messages render with the chat template, onToken sees every token once in order, a bad prompt fails alone", async () => {
    const model = new FakeModel();
    const chat = [{ role: "user" as const, content: "hi" }];
    const seen = new Map<number, Token[]>();
    const options = { temperature: 0, maxTokens: 4 };
    const results = await model.batchGenerate(["ab", chat, [{ role: "bogus", content: "x" } as never]], {
      ...options,
      onToken: (index, token) => seen.set(index, [...(seen.get(index) ?? []), token]),
    });
    assert.deepEqual(seen.get(0), results[0]!.tokens);
    assert.deepEqual(seen.get(1), results[1]!.tokens);
    assert.equal(seen.has(2), false);
    assert.equal(results[1]!.text, (await model.chatText(chat, options)).text);
    assert.equal(results[0]!.text, (await model.generateText("ab", options)).text);
    assert.equal(results[2]!.finishReason, "error");
    assert.equal((results[2]!.error as { code?: string }).code, "INVALID_OPTION");
    await assertCode(model.batchGenerate(["ab"], { onToken: 5 as never }), "INVALID_OPTION");
    await model.close();
  });
});
