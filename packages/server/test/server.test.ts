import assert from "node:assert/strict";
import { once } from "node:events";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { createServer, type InferServer } from "../src/index.js";
import { FakeEmbeddingModel, FakeModel, STORY } from "./fake-model.js";

const FULL = STORY.join("");

async function start(options: Parameters<typeof createServer>[0]): Promise<{ server: InferServer; url: string }> {
  const server = createServer(options);
  const { url } = await server.listen(0, "127.0.0.1");
  return { server, url };
}

function client(url: string, apiKey = "unused"): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 });
}

async function postJson(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, headers: res.headers, body: (await res.json()) as { error: { message: string; type: string; code: string | null; param: string | null } } };
}

describe("OpenAI client against the server", () => {
  const model = new FakeModel();
  let server: InferServer;
  let url: string;
  before(async () => ({ server, url } = await start({ models: { story: model } })));
  after(() => server.close());

  test("non-streaming chat completion", async () => {
    const answer = await client(url).chat.completions.create({ model: "story", messages: [{ role: "user", content: "tell me a story" }] });
    assert.equal(answer.object, "chat.completion");
    assert.equal(answer.choices[0]!.message.content, FULL);
    assert.equal(answer.choices[0]!.finish_reason, "stop");
    assert.equal(answer.usage?.completion_tokens, STORY.length);
    // The fake counts the words of the rendered prompt "user: tell me a story\nassistant:".
    assert.equal(answer.usage?.prompt_tokens, 6);
    assert.equal(model.lastPrompt, "user: tell me a story\nassistant:");
  });

  test("streaming chat completion with usage", async () => {
    const stream = await client(url).chat.completions.create({
      model: "story",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? "";
        finish = choice.finish_reason ?? finish;
      }
    }
    assert.equal(text, FULL);
    assert.equal(finish, "stop");
    assert.equal(usage?.completion_tokens, STORY.length);
  });

  test("max_tokens, stop strings, sampling options reach the model", async () => {
    const short = await client(url).chat.completions.create({
      model: "story",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
      temperature: 0,
      top_p: 0.5,
      seed: 7,
    });
    assert.equal(short.choices[0]!.message.content, "Once upon a");
    assert.equal(short.choices[0]!.finish_reason, "length");
    assert.equal(model.lastOptions?.temperature, 0);
    assert.equal(model.lastOptions?.topP, 0.5);
    assert.equal(model.lastOptions?.seed, 7);
    const stopped = await client(url).chat.completions.create({ model: "story", messages: [{ role: "user", content: "hi" }], stop: [" time"] });
    assert.equal(stopped.choices[0]!.message.content, "Once upon a");
    assert.equal(stopped.choices[0]!.finish_reason, "stop");
  });

  test("text completions, streaming and not", async () => {
    const done = await client(url).completions.create({ model: "story", prompt: "Once", max_tokens: 4, echo: true });
    assert.equal(done.choices[0]!.text, "OnceOnce upon a time");
    assert.equal(model.lastPrompt, "Once");
    const stream = await client(url).completions.create({ model: "story", prompt: "x", stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    assert.equal(text, FULL);
  });

  test("models list and health", async () => {
    const list = await client(url).models.list();
    assert.deepEqual(
      list.data.map((m) => m.id),
      ["story"],
    );
    const health = await (await fetch(`${url}/health`)).json();
    assert.deepEqual(health, { status: "ok", models: ["story"] });
  });

  test("logprobs are refused with 400", async () => {
    await assert.rejects(
      client(url).chat.completions.create({ model: "story", messages: [{ role: "user", content: "x" }], logprobs: true }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.code === "unsupported_parameter",
    );
  });
});

describe("concurrency, queueing and aborts", () => {
  test("20 concurrent streaming requests all complete", async () => {
    const model = new FakeModel(1);
    const { server, url } = await start({ models: { story: model } });
    try {
      const openai = client(url);
      const texts = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const stream = await openai.chat.completions.create({ model: "story", messages: [{ role: "user", content: `n${i}` }], stream: true });
          let text = "";
          for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
          return text;
        }),
      );
      assert.deepEqual(texts, Array(20).fill(FULL));
      // Streams that wait together share batchGenerate calls: every prompt decoded once, in fewer calls.
      assert.equal(model.started, 0, "no request ran alone through chat()");
      assert.deepEqual(model.batches.flat().sort(), Array.from({ length: 20 }, (_, i) => `user: n${i}\nassistant:`).sort());
      assert.ok(model.batches.length < 20, `${model.batches.length} batches for 20 requests`);
    } finally {
      await server.close();
    }
  });

  test("a disconnected client's generation is aborted and its slot freed", async () => {
    const model = new FakeModel(20, Array(500).fill(" word"));
    const { server, url } = await start({ models: { story: model } });
    try {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
          res.once("data", () => {
            // First chunk arrived: the generation runs. Hang up.
            req.destroy();
            resolve();
          });
        });
        req.on("error", (e) => (e.message.includes("socket hang up") ? undefined : reject(e)));
        req.end(JSON.stringify({ model: "story", messages: [{ role: "user", content: "go" }], stream: true }));
      });
      const deadline = Date.now() + 5000;
      while (model.aborts === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.equal(model.aborts, 1, "the model saw the abort");
      // The slot is free again: a new (short) request completes.
      const next = await client(url).chat.completions.create({ model: "story", messages: [{ role: "user", content: "x" }], max_tokens: 2 });
      assert.equal(next.choices[0]!.message.content, " word word");
    } finally {
      await server.close();
    }
  });

  test("a client's FIN aborts its generation in the turn the server reads it", async () => {
    // Node closes the response only after its own FIN is out (a later turn), while a generation would go
    // on decoding; the soak's disconnect probes saw llama_cpp decode two more tokens that way.
    const model = new FakeModel(1, Array(5000).fill(" word"));
    const { server, url } = await start({ models: { story: model } });
    try {
      const accepted = once(server.http, "connection") as Promise<[Socket]>;
      const socket = connect(Number(new URL(url).port), "127.0.0.1");
      const body = JSON.stringify({ model: "story", prompt: "go", stream: true });
      socket.write(
        `POST /v1/completions HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await once(socket, "data");
      const [peer] = await accepted;
      const signal = model.lastSignal;
      assert.ok(signal && !signal.aborted, "the generation runs");
      // Checked in the same turn of the server's event loop as its reading of the FIN (setImmediate runs
      // before the next poll for I/O, where Node would complete its own shutdown of the socket).
      const abortedInThatTurn = new Promise<boolean>((resolve) => peer.prependOnceListener("end", () => setImmediate(() => resolve(signal.aborted))));
      socket.resume();
      socket.end();
      assert.equal(await abortedInThatTurn, true);
      socket.destroy();
      const deadline = Date.now() + 5000;
      while (model.aborts === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.equal(model.aborts, 1, "the model stopped");
    } finally {
      await server.close();
    }
  });

  test("non-streaming completions that wait together are decoded in one batch", async () => {
    const model = new FakeModel(40);
    const { server, url } = await start({ models: { story: model } });
    try {
      const openai = client(url);
      const ask = (prompt: string, max_tokens: number, extra: { temperature?: number; stop?: string } = {}) =>
        openai.completions.create({ model: "story", prompt, max_tokens, temperature: 0, ...extra });
      const first = ask("p0", 5);
      // Once p0 is decoding (9 steps of 40 ms), the next three wait for it together.
      while (model.batches.length === 0) await new Promise((r) => setTimeout(r, 2));
      const rest = await Promise.all([ask("p1", 5), ask("p2", 5, { temperature: 0.5 }), ask("p3", 5, { stop: " time" })]);
      const texts = [await first, ...rest].map((c) => c.choices[0]!.text);
      assert.deepEqual(texts, ["Once upon a time there", "Once upon a time there", "Once upon a time there", "Once upon a"]);
      assert.deepEqual(
        rest.map((c) => c.choices[0]!.finish_reason),
        ["length", "length", "stop"],
      );
      // p2 samples at another temperature, so it cannot share p1 and p3's batch; p3's own stop string can.
      assert.deepEqual(model.batches, [["p0"], ["p1", "p3"], ["p2"]]);
      // The server matches p3's stop string itself: the batch runs without any.
      assert.deepEqual(model.batchOptions[1]!.stopStrings, []);
      const text = await (await fetch(`${url}/metrics`)).text();
      assert.match(text, /^infer_batches_total\{model="story"\} 3$/m);
      assert.match(text, /^infer_batched_requests_total\{model="story"\} 4$/m);
    } finally {
      await server.close();
    }
  });

  test("a full queue answers 429 with Retry-After", async () => {
    const model = new FakeModel(30);
    const { server, url } = await start({ models: { story: model }, maxQueue: 1 });
    try {
      const body = JSON.stringify({ model: "story", messages: [{ role: "user", content: "x" }] });
      const first = postJson(`${url}/v1/chat/completions`, body);
      const second = postJson(`${url}/v1/chat/completions`, body);
      // Wait until one request runs and the other waits.
      while (!/^infer_queue_depth\{model="story"\} 1$/m.test(await (await fetch(`${url}/metrics`)).text())) {
        await new Promise((r) => setTimeout(r, 5));
      }
      const third = await postJson(`${url}/v1/chat/completions`, body);
      assert.equal(third.status, 429);
      assert.equal(third.headers.get("retry-after"), "1");
      assert.equal(third.body.error.code, "queue_full");
      // Text completions that would wait for a batch count against the same queue.
      const text = await postJson(`${url}/v1/completions`, JSON.stringify({ model: "story", prompt: "x" }));
      assert.equal(text.status, 429);
      assert.equal((await first).status, 200);
      assert.equal((await second).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe("raw HTTP errors", () => {
  const model = new FakeEmbeddingModel();
  let server: InferServer;
  let url: string;
  before(async () => ({ server, url } = await start({ models: { story: model, plain: new FakeModel() }, apiKey: "sekret", maxBodyBytes: 1000 })));
  after(() => server.close());
  const auth = { authorization: "Bearer sekret" };

  test("missing or wrong API key: 401", async () => {
    const body = JSON.stringify({ model: "story", messages: [{ role: "user", content: "x" }] });
    const attempts: Record<string, string>[] = [{}, { authorization: "Bearer nope" }];
    for (const headers of attempts) {
      const res = await postJson(`${url}/v1/chat/completions`, body, headers);
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, "invalid_api_key");
      assert.equal(res.body.error.type, "invalid_request_error");
    }
    assert.equal((await postJson(`${url}/v1/chat/completions`, body, auth)).status, 200);
    assert.equal((await fetch(`${url}/health`)).status, 200, "health needs no key");
  });

  test("malformed JSON: 400", async () => {
    const res = await postJson(`${url}/v1/chat/completions`, "{ not json", auth);
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "invalid_json");
    assert.equal(res.body.error.type, "invalid_request_error");
    assert.equal(res.body.error.param, null);
  });

  test("unknown model: 404", async () => {
    const res = await postJson(`${url}/v1/chat/completions`, JSON.stringify({ model: "nope", messages: [{ role: "user", content: "x" }] }), auth);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, "model_not_found");
    assert.equal(res.body.error.param, "model");
    assert.match(res.body.error.message, /nope/);
  });

  test("oversize body: 413", async () => {
    const res = await postJson(`${url}/v1/chat/completions`, JSON.stringify({ model: "story", messages: [{ role: "user", content: "x".repeat(2000) }] }), auth);
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, "request_too_large");
  });

  test("invalid fields name the parameter: 400", async () => {
    const res = await postJson(`${url}/v1/chat/completions`, JSON.stringify({ model: "story", messages: [{ role: "user", content: "x" }], temperature: 9 }), auth);
    assert.equal(res.status, 400);
    assert.equal(res.body.error.param, "temperature");
    const empty = await postJson(`${url}/v1/chat/completions`, JSON.stringify({ model: "story", messages: [] }), auth);
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.param, "messages");
  });

  test("a context overflow from the model maps to 400 context_length_exceeded", async () => {
    const res = await postJson(`${url}/v1/completions`, JSON.stringify({ model: "story", prompt: "overflow" }), auth);
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "context_length_exceeded");
  });

  test("json_schema response_format needs the grammar capability", async () => {
    const request = {
      model: "story",
      messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "t", schema: { type: "object" } } },
    };
    const refused = await postJson(`${url}/v1/chat/completions`, JSON.stringify(request), auth);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.param, "response_format");
    model.capabilities = { grammar: "supported" };
    try {
      const accepted = await postJson(`${url}/v1/chat/completions`, JSON.stringify(request), auth);
      assert.equal(accepted.status, 200);
      assert.deepEqual(model.lastOptions?.jsonSchema, { type: "object" });
    } finally {
      model.capabilities = {};
    }
  });

  test("embeddings: vectors from an embedding model, 400 from one without", async () => {
    const openai = client(url, "sekret");
    const result = await openai.embeddings.create({ model: "story", input: ["a b", "abc"], encoding_format: "float" });
    assert.deepEqual(
      result.data.map((d) => d.embedding),
      [
        [3, 2, 1],
        [3, 1, 1],
      ],
    );
    const res = await postJson(`${url}/v1/embeddings`, JSON.stringify({ model: "plain", input: "x" }), auth);
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "embeddings_unsupported");
  });

  test("metrics in Prometheus text", async () => {
    const text = await (await fetch(`${url}/metrics`, { headers: auth })).text();
    assert.match(text, /^# TYPE infer_requests_total counter$/m);
    assert.match(text, /^infer_requests_total\{endpoint="\/v1\/chat\/completions",status="401"\} 2$/m);
    assert.match(text, /^infer_queue_depth\{model="story"\} 0$/m);
    assert.match(text, /^infer_request_duration_seconds_bucket\{endpoint="\/v1\/chat\/completions",le="\+Inf"\} \d+$/m);
    assert.match(text, /^infer_completion_tokens_total\{model="story"\} \d+$/m);
  });
});
