import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Backend, isInferenceError, loadModel, type TextModel } from "@infer/core";
import { assertCode, runConformanceSuite } from "@infer/core/testing";
import { loadRemoteModel, remoteBackend, type RemoteModel } from "../src/index.js";
import { type RunningServer, skipWithoutStories, startLlamaServer, STORIES_GGUF } from "./llama-server.js";

/** One llama-server for the conformance suite and the checks that leave it running. */
let shared: Promise<RunningServer> | undefined;
const sharedServer = () => (shared ??= startLlamaServer());
after(async () => {
  if (shared) await (await shared).kill();
});

runConformanceSuite({
  name: "remote llama-server stories260K.gguf",
  load: async () => loadModel((await sharedServer()).url),
  backend: remoteBackend,
  skip: skipWithoutStories,
  // llama-server renders chats with its default template (stories260K has none of its own).
  chatMessages: [{ role: "user", content: "Once upon a time" }],
  // The first run builds llama-server (see scripts/llama-server/build.mjs): the before hook may take long.
  timeoutMs: 120_000,
});

/**
 * The llama_cpp backend from its build output: a test-only link, so that this
 * package does not depend on another backend.
 */
const LLAMA_CPP = new URL("../../../llama-cpp/dist/bundle/index.js", import.meta.url);
const llamaCppMissing = existsSync(fileURLToPath(LLAMA_CPP)) ? undefined : `needs the llama_cpp backend's build at ${fileURLToPath(LLAMA_CPP)}`;

describe("remote against a real llama-server", { skip: skipWithoutStories, concurrency: 1 }, () => {
  let server: RunningServer;
  let model: RemoteModel;
  before(async () => {
    server = await sharedServer();
    model = await loadRemoteModel(server.url);
  });
  after(async () => {
    await model?.close();
  });

  test("greedy text equals the llama_cpp backend's on the same GGUF", { skip: llamaCppMissing }, async () => {
    const { llamaCppBackend } = (await import(LLAMA_CPP.href)) as { llamaCppBackend: Backend };
    const local = await llamaCppBackend.loadModel(STORIES_GGUF, { threads: 1 });
    try {
      for (const prompt of ["Once upon a time", "The little dog"]) {
        const options = { temperature: 0, maxTokens: 48 };
        const [remote, direct] = [await model.generateText(prompt, options), await local.generateText(prompt, options)];
        assert.ok(direct.tokens.length > 10);
        assert.equal(remote.text, direct.text, prompt);
        assert.deepEqual(remote.tokens.map((t) => t.id), direct.tokens.map((t) => t.id), prompt);
      }
    } finally {
      await local.close();
    }
  });

  test("greedy text from BOS is llama2.c's published output", async () => {
    const expected = readFileSync(STORIES_GGUF.replace(/stories260K\.gguf$/, "expected-greedy-200.txt"), "utf8").replace(/\n$/, "");
    const result = await model.generateText("", { temperature: 0, maxTokens: 64 });
    assert.ok(model.server.dialect === "llama-server");
    assert.ok(result.text.length > 40);
    assert.ok(expected.startsWith(result.text), `${JSON.stringify(result.text)} is not a prefix of the oracle`);
  });

  test("info() and the tokenizer come from the server", async () => {
    const info = model.info();
    assert.equal(info.vocabSize, 512);
    assert.equal(info.format, "remote");
    assert.ok(info.contextLength > 0 && info.contextLength <= 1024, `contextLength ${info.contextLength}`);
    assert.equal(model.server.dialect, "llama-server");
    assert.equal(model.server.tokenizer, true);
    const ids = await model.tokenize("Once upon a time", { addSpecialTokens: false });
    assert.ok(ids.length >= 4);
    assert.equal(await model.detokenize(ids), "Once upon a time");
    const greedy = await model.generateText("Once upon a time", { temperature: 0, maxTokens: 12 });
    assert.equal(await model.detokenize(greedy.tokens.map((t) => t.id)), greedy.text);
  });

  test("a GBNF grammar and a JSON schema constrain the output", async () => {
    const answer = await model.generateText("Was the dog happy?", { temperature: 0.8, seed: 5, maxTokens: 8, grammar: 'root ::= ("yes" | "no") "."' });
    assert.match(answer.text, /^(yes|no)\.$/);
    const schema = {
      type: "object",
      properties: { name: { type: "string", minLength: 1, maxLength: 8 }, age: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const json = await model.generateText("Lily", { temperature: 0.8, seed: 9, maxTokens: 48, jsonSchema: schema });
    const value = JSON.parse(json.text) as { name: string; age: number };
    assert.equal(typeof value.name, "string");
    assert.ok(value.name.length >= 1 && value.name.length <= 8);
    assert.ok(Number.isInteger(value.age) && value.age >= 1 && value.age <= 9);
  });

  test("logprobs come back per token with their alternatives", async () => {
    const result = await model.generateText("Once upon a time", { temperature: 0, maxTokens: 4, logprobs: 3 });
    for (const token of result.tokens) {
      assert.ok(token.logprob! <= 0);
      assert.equal(token.topLogprobs!.length, 3);
      // Greedy: the token chosen is the most likely.
      assert.equal(token.topLogprobs![0]!.id, token.id);
    }
  });
});

describe("remote against llama-server: abort, crash, restart", { skip: skipWithoutStories, concurrency: 1 }, () => {
  // A context long enough that an unstopped generation would run for seconds.
  const long = { temperature: 0, maxTokens: 30_000, ignoreEos: true };

  test("abort closes the stream and the server's slot goes idle", async () => {
    const server = await startLlamaServer({ contextLength: 32_768, slots: 1, extra: ["--metrics"] });
    try {
      await using model = await loadRemoteModel(server.url);
      const controller = new AbortController();
      let received = 0;
      await assertCode(
        (async () => {
          for await (const _token of model.generate("Once upon a time", { ...long, signal: controller.signal })) {
            if (++received === 3) controller.abort();
          }
        })(),
        "ABORTED",
      );
      const deadline = Date.now() + 3_000;
      while ((await server.slots()).some((slot) => slot.is_processing)) {
        assert.ok(Date.now() < deadline, "the server kept generating 3 s after the stream was closed");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // Idle because it stopped, not because it finished: far fewer tokens decoded than were asked for.
      const decoded = await server.metric("tokens_predicted_total");
      assert.ok(decoded !== undefined && decoded >= 3 && decoded < long.maxTokens / 2, `the server decoded ${decoded} tokens`);
    } finally {
      await server.kill();
    }
  });

  test("llama-server killed mid-stream gives REMOTE_UNAVAILABLE within timeoutMs; a restarted server serves the model again", async () => {
    const server = await startLlamaServer({ contextLength: 32_768, slots: 1 });
    let restarted: RunningServer | undefined;
    try {
      await using model = await loadRemoteModel(server.url, { remote: { timeoutMs: 3_000, maxRetries: 0 } });
      let received = 0;
      let killedAt = 0;
      const error = await (async () => {
        try {
          for await (const _token of model.generate("Once upon a time", long)) {
            if (++received === 3) {
              killedAt = performance.now();
              await server.kill();
            }
          }
        } catch (caught) {
          return caught;
        }
      })();
      assert.ok(isInferenceError(error, "REMOTE_UNAVAILABLE"), String(error));
      assert.ok(performance.now() - killedAt < 3_000, "the error came later than timeoutMs");
      await assertCode(model.generateText("Once", { maxTokens: 2 }), "REMOTE_UNAVAILABLE");

      restarted = await startLlamaServer({ contextLength: 32_768, slots: 1, port: server.port });
      const again = await model.generateText("Once upon a time", { temperature: 0, maxTokens: 8 });
      assert.equal(again.tokens.length, 8);
    } finally {
      await server.kill();
      await restarted?.kill();
    }
  });

  test("a server still loading (refusing, then 503) is retried until it serves", async () => {
    const server = await startLlamaServer({ waitReady: false });
    let model: TextModel | undefined;
    try {
      model = await loadRemoteModel(server.url, { remote: { maxRetries: 30, timeoutMs: 30_000 } });
      const result = await model.generateText("Once upon a time", { temperature: 0, maxTokens: 4 });
      assert.equal(result.tokens.length, 4);
    } finally {
      await model?.close();
      await server.kill();
    }
  });
});
