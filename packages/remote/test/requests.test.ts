import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isInferenceError, isModelFileUrl, isServerUrl, loadModel, urlFormat } from "@infer/core";
import { assertCode } from "@infer/core/testing";
import { API_KEY_ENV, endpointOf, loadRemoteModel, type RemoteModel } from "../src/index.js";
import { fakesClosedAfterTests, json, streamTokens, type SeenRequest } from "./fake-server.js";

const fake = fakesClosedAfterTests();

const answering = (req: SeenRequest, res: Parameters<typeof streamTokens>[0]) => {
  if (req.body?.stream) return streamTokens(res, ["a", "b"]);
  json(res, 200, { choices: [{ index: 0, text: "a", finish_reason: "length" }] });
};

describe("remote: model references", () => {
  test("a server's base URL is format remote; a model file's URL is not", () => {
    for (const url of ["http://127.0.0.1:8080", "http://gpu-box:8000/v1", "https://api.example.com/v1/", "http://host/prefix/v1"]) {
      assert.ok(isServerUrl(url), url);
      assert.equal(urlFormat(url), "remote");
    }
    for (const url of ["https://host/models/x.gguf", "https://huggingface.co/org/repo/resolve/main/model.safetensors", "http://h/resolve/main/weights"]) {
      assert.ok(isModelFileUrl(url), url);
      assert.ok(!isServerUrl(url), url);
    }
    for (const path of ["./model.gguf", "/models/x", "ftp://host/x", "http://"]) assert.equal(urlFormat(path), undefined, path);
    assert.deepEqual(endpointOf("http://h:1/v1/"), { url: "http://h:1/v1/", root: "http://h:1", apiBase: "http://h:1/v1" });
    assert.deepEqual(endpointOf("http://h:1"), { url: "http://h:1", root: "http://h:1", apiBase: "http://h:1/v1" });
  });

  test("loadModel picks backend remote for a server URL, without looking for a local file", async () => {
    const server = await fake(answering);
    await using model = await loadModel(`${server.url}/v1`);
    assert.equal(model.backend, "remote");
    assert.equal(model.info().format, "remote");
    assert.equal(model.info().contextLength, 128);
    assert.equal((model as RemoteModel).server.dialect, "llama-server");
  });

  test("LoadOptions.remote is validated before any request, naming the field", async () => {
    const server = await fake(answering);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ timeoutMs: 0 }, /'remote' field 'timeoutMs' must be an integer >= 1/],
      [{ maxRetries: -1 }, /field 'maxRetries'/],
      [{ maxConcurrency: 1.5 }, /field 'maxConcurrency'/],
      [{ headers: { "x-a": 1 } }, /field 'headers' must map header names to strings/],
      [{ apikey: "k" }, /unknown field 'apikey'/],
    ];
    for (const [remote, message] of cases) {
      const error = await assertCode(loadModel(server.url, { remote } as never), "INVALID_OPTION");
      assert.match(error.message, message);
    }
    await assertCode(loadModel(server.url, { remote: "x" } as never), "INVALID_OPTION");
    assert.equal(server.requests.length, 0);
  });

  test("load options the server decides are UNSUPPORTED, not ignored", async () => {
    const server = await fake(answering);
    for (const option of ["contextLength", "threads", "gpuLayers", "draftModel"]) {
      const error = await assertCode(loadRemoteModel(server.url, { [option]: option === "draftModel" ? "x" : 2 }), "UNSUPPORTED");
      assert.match(error.message, new RegExp(`'${option}'`));
    }
  });

  test("the model is the one asked for, or the only one listed", async () => {
    const listing = (ids: string[]) => (_req: SeenRequest, res: Parameters<typeof json>[0]) =>
      json(res, 200, { data: ids.map((id) => ({ id, object: "model", owned_by: "vllm" })) });
    const two = await fake(answering, { ownedBy: "vllm", models: listing(["a", "b"]) });
    const error = await assertCode(loadRemoteModel(two.url), "INVALID_OPTION");
    assert.match(error.message, /lists 2 models \(a, b\)/);
    await assertCode(loadRemoteModel(two.url, { remote: { model: "c" } }), "MODEL_NOT_FOUND");
    await using chosen = await loadRemoteModel(two.url, { remote: { model: "b" } });
    assert.deepEqual(chosen.server.model, "b");
    assert.equal(chosen.server.dialect, "vllm");
  });

  test("the API key (option, else INFER_REMOTE_API_KEY) and extra headers go with every request", async () => {
    const server = await fake(answering);
    process.env[API_KEY_ENV] = "from-env";
    try {
      await using fromEnv = await loadRemoteModel(server.url);
      await fromEnv.generateText("x", { maxTokens: 2 });
      assert.ok(server.requests.every((r) => r.headers.authorization === "Bearer from-env"));
      const seen = server.requests.length;
      await using given = await loadRemoteModel(server.url, { remote: { apiKey: "given", headers: { "x-tenant": "t1" } } });
      await given.generateText("x", { maxTokens: 2 });
      const later = server.requests.slice(seen);
      assert.ok(later.length > 0 && later.every((r) => r.headers.authorization === "Bearer given" && r.headers["x-tenant"] === "t1"));
    } finally {
      delete process.env[API_KEY_ENV];
    }
  });
});

describe("remote: options per dialect", () => {
  test("OpenAI's API: options it has no field for are UNSUPPORTED before anything is sent; defaults are left to it", async () => {
    const server = await fake(answering, { ownedBy: "openai" });
    await using model = await loadRemoteModel(server.url);
    assert.equal(model.server.dialect, "openai");
    for (const [option, value] of [
      ["topK", 5],
      ["minP", 0.2],
      ["repeatPenalty", 1.1],
      ["ignoreEos", true],
      ["grammar", "root ::= \"a\""],
      ["stopTokens", [3]],
    ] as const) {
      const error = await assertCode(model.generateText("x", { [option]: value }), "UNSUPPORTED");
      assert.match(error.message, new RegExp(`'${option}'`));
    }
    await assertCode(model.classify(["x"], { logits: true }), "UNSUPPORTED");
    await assertCode(model.chatText([{ role: "user", content: "hi" }], { chatTemplate: "{{ x }}" }), "UNSUPPORTED");
    assert.equal(server.completions().length, 0, "a request was sent for an option the server cannot honour");

    await model.generateText("x", { temperature: 0.3, seed: 7, maxTokens: 2, jsonSchema: { type: "object" } });
    const body = server.completions()[0]!.body!;
    assert.equal(body.temperature, 0.3);
    assert.equal(body.seed, 7);
    assert.equal(body.max_tokens, 2);
    assert.equal(body.top_k, undefined);
    assert.deepEqual(body.response_format, { type: "json_schema", json_schema: { name: "output", schema: { type: "object" }, strict: true } });
  });

  test("vLLM: its own field names, token ids asked for", async () => {
    const server = await fake(answering, { ownedBy: "vllm" });
    await using model = await loadRemoteModel(server.url);
    await model.generateText("x", { repeatPenalty: 1.2, topK: 3, minP: 0.1, grammar: "root ::= \"a\"", maxTokens: 2 });
    const body = server.completions()[0]!.body!;
    assert.equal(body.repetition_penalty, 1.2);
    assert.equal(body.top_k, 3);
    assert.equal(body.min_p, 0.1);
    assert.equal(body.guided_grammar, 'root ::= "a"');
    assert.equal(body.return_token_ids, true);
    await model.generateText("x", { jsonSchema: { type: "object" }, maxTokens: 2 });
    assert.deepEqual(server.completions()[1]!.body!.guided_json, { type: "object" });
    // vLLM penalises the whole text: a window other than the default cannot be honoured.
    await assertCode(model.generateText("x", { repeatPenalty: 1.2, repeatLastN: 8 }), "UNSUPPORTED");
  });

  test("llama-server: llama.cpp's fields, n_probs for token ids, per-token timings", async () => {
    const server = await fake(answering);
    await using model = await loadRemoteModel(server.url);
    await model.generateText("x", { repeatPenalty: 1.2, repeatLastN: 16, seed: 3, ignoreEos: true, maxTokens: 2, grammar: "root ::= \"a\"" });
    const body = server.completions()[0]!.body!;
    assert.equal(body.repeat_penalty, 1.2);
    assert.equal(body.repeat_last_n, 16);
    assert.equal(body.ignore_eos, true);
    assert.equal(body.n_probs, 1);
    assert.equal(body.timings_per_token, true);
    assert.equal(body.grammar, 'root ::= "a"');
    assert.equal(body.stop, undefined, "stop strings are applied by the client");
    const tokens = (await model.generateText("x", { maxTokens: 5 })).tokens;
    assert.deepEqual(tokens.map((t) => [t.id, t.text]), [[1, "a"], [2, "b"]]);
  });

  /** A server that answers `texts` 50 ms after each request and counts the most requests it held at once. */
  async function slowServer(texts: string[]) {
    let inFlight = 0;
    const seen = { most: 0 };
    const server = await fake((_req, res) => {
      seen.most = Math.max(seen.most, ++inFlight);
      setTimeout(() => {
        inFlight--;
        streamTokens(res, texts);
      }, 50);
    });
    return { server, seen };
  }

  test("batchGenerate runs at most maxConcurrency requests at once", async () => {
    const { server, seen } = await slowServer(["a"]);
    await using model = await loadRemoteModel(server.url, { remote: { maxConcurrency: 2 } });
    const results = await model.batchGenerate(["p", "q", "r", "s", "t"], { maxTokens: 3 });
    assert.deepEqual(results.map((r) => r.text), ["a", "a", "a", "a", "a"]);
    assert.equal(seen.most, 2);
    assert.equal(server.completions().length, 5);
  });

  test("concurrent generate calls run as concurrent requests, at most maxConcurrency at once; close waits for them", async () => {
    // The server batches concurrent requests itself: streams on one remote model must not wait for each other.
    const { server, seen } = await slowServer(["a", "b"]);
    const model = await loadRemoteModel(server.url, { remote: { maxConcurrency: 3 } });
    const texts = await Promise.all(
      Array.from({ length: 5 }, async () => {
        let text = "";
        for await (const token of model.generate("p", { maxTokens: 4 })) text += token.text;
        return text;
      }),
    );
    assert.deepEqual(texts, ["ab", "ab", "ab", "ab", "ab"]);
    assert.equal(seen.most, 3);
    // Two streams parked at their first token: close() finishes both and the model is closed.
    const parked = [model.generate("p", { maxTokens: 4 })[Symbol.asyncIterator](), model.generate("q", { maxTokens: 4 })[Symbol.asyncIterator]()];
    for (const stream of parked) assert.equal((await stream.next()).value?.text, "a");
    await model.close();
    for (const stream of parked) await assert.rejects(stream.next(), (error: unknown) => isInferenceError(error, "CLOSED") || isInferenceError(error, "ABORTED"));
  });
});
