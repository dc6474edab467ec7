import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type InferenceError, isInferenceError, type TextModel } from "@infer/core";
import { assertCode } from "@infer/core/testing";
import { loadRemoteModel } from "../src/index.js";
import { freePort as closedPort } from "./llama-server.js";
import { fakesClosedAfterTests, json, openSse, startFake, streamTokens, tokenEvent } from "./fake-server.js";

const fake = fakesClosedAfterTests();

async function timed<T>(work: Promise<T>): Promise<[T | unknown, number]> {
  const start = performance.now();
  try {
    return [await work, performance.now() - start];
  } catch (error) {
    return [error, performance.now() - start];
  }
}

const greedy = { temperature: 0, maxTokens: 8 };

describe("remote: unreachable servers", () => {
  test("connection refused is REMOTE_UNAVAILABLE, retried with backoff within timeoutMs", async () => {
    const port = await closedPort();
    const [error, ms] = await timed(loadRemoteModel(`http://127.0.0.1:${port}/v1`, { remote: { maxRetries: 2, timeoutMs: 5_000 } }));
    assert.ok(isInferenceError(error, "REMOTE_UNAVAILABLE"), String(error));
    assert.equal(error.details.socketCode, "ECONNREFUSED");
    // Two backoffs of at least half their 200 and 400 ms ceilings were waited.
    assert.ok(ms >= 300 && ms < 5_000, `took ${ms} ms`);
  });

  test("a host name that does not resolve is REMOTE_UNAVAILABLE naming DNS", async () => {
    const error = await assertCode(loadRemoteModel("http://no-such-host.invalid:8080", { remote: { maxRetries: 0, timeoutMs: 10_000 } }), "REMOTE_UNAVAILABLE");
    assert.match(error.message, /no-such-host\.invalid/);
  });

  test("a server that accepts but never answers fails within timeoutMs", async () => {
    const silent = await fake(() => undefined, { models: () => undefined });
    const [error, ms] = await timed(loadRemoteModel(silent.url, { remote: { timeoutMs: 400 } }));
    assert.ok(isInferenceError(error, "REMOTE_UNAVAILABLE"), String(error));
    assert.match((error as Error).message, /timeoutMs/);
    assert.ok(ms < 2_000, `took ${ms} ms`);
  });
});

describe("remote: busy servers", () => {
  test("429 with Retry-After is waited out and retried", async () => {
    let calls = 0;
    const server = await fake((_req, res) => {
      if (++calls === 1) return json(res, 429, { error: { message: "slow down" } }, { "retry-after": "1" });
      streamTokens(res, ["Once", " upon"]);
    });
    await using model = await loadRemoteModel(server.url);
    const [result, ms] = await timed(model.generateText("x", greedy));
    assert.equal((result as { text: string }).text, "Once upon");
    assert.equal(server.completions().length, 2);
    assert.ok((ms as number) >= 950, `retried after ${ms} ms, before Retry-After's second`);
  });

  test("503 beyond maxRetries is REMOTE_UNAVAILABLE with the status; exactly 1 + maxRetries attempts", async () => {
    const server = await fake((_req, res) => json(res, 503, { error: { message: "loading model" } }));
    await using model = await loadRemoteModel(server.url, { remote: { maxRetries: 2 } });
    const error = await assertCode(model.generateText("x", greedy), "REMOTE_UNAVAILABLE");
    assert.equal((error as InferenceError).details.status, 503);
    assert.match(error.message, /loading model/);
    assert.equal(server.completions().length, 3);
  });

  test("a Retry-After longer than timeoutMs fails at once instead of waiting past it", async () => {
    const server = await fake((_req, res) => json(res, 429, { error: { message: "quota" } }, { "retry-after": "30" }));
    await using model = await loadRemoteModel(server.url, { remote: { timeoutMs: 2_000 } });
    const [error, ms] = await timed(model.generateText("x", greedy));
    assert.ok(isInferenceError(error, "REMOTE_UNAVAILABLE"), String(error));
    assert.equal((error as InferenceError).details.retryAfterMs, 30_000);
    assert.ok(ms < 1_000, `took ${ms} ms`);
  });
});

describe("remote: broken streams", () => {
  test("a server dying mid-stream is REMOTE_UNAVAILABLE after the tokens it sent, and is not retried", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      tokenEvent(res, 1, "Once");
      tokenEvent(res, 2, " upon");
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await using model = await loadRemoteModel(server.url, { remote: { maxRetries: 3 } });
    const received: string[] = [];
    await assertCode(
      (async () => {
        for await (const token of model.generate("x", greedy)) received.push(token.text);
      })(),
      "REMOTE_UNAVAILABLE",
    );
    assert.deepEqual(received, ["Once", " upon"]);
    assert.equal(server.completions().length, 1, "a stream that had produced tokens was retried");
  });

  test("a stream that ends cleanly but unfinished (no finish reason, no [DONE]) is REMOTE_UNAVAILABLE", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      tokenEvent(res, 1, "Once");
      res.end();
    });
    await using model = await loadRemoteModel(server.url);
    await assertCode(model.generateText("x", greedy), "REMOTE_UNAVAILABLE");
  });

  test("a server gone silent mid-stream fails within timeoutMs", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      tokenEvent(res, 1, "Once");
    });
    await using model = await loadRemoteModel(server.url, { remote: { timeoutMs: 500 } });
    const [error, ms] = await timed(model.generateText("x", greedy));
    assert.ok(isInferenceError(error, "REMOTE_UNAVAILABLE"), String(error));
    assert.ok(ms < 2_500, `took ${ms} ms`);
  });

  test("malformed SSE (a data line that is not JSON) is REMOTE_ERROR", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      res.end("data: {\"choices\": [{\"text\": \n\n");
    });
    await using model = await loadRemoteModel(server.url);
    const error = await assertCode(model.generateText("x", greedy), "REMOTE_ERROR");
    assert.match(error.message, /malformed server-sent event/);
  });

  test("an oversized streamed event is REMOTE_ERROR, not unbounded memory", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      res.write("data: \"");
      const block = "x".repeat(1 << 20);
      let sent = 0;
      const pump = () => {
        while (sent < 20 && res.write(block)) sent++;
        if (sent < 20) res.once("drain", pump);
      };
      pump();
    });
    await using model = await loadRemoteModel(server.url);
    const error = await assertCode(model.generateText("x", greedy), "REMOTE_ERROR");
    assert.match(error.message, /larger than/);
  });

  test("an answer that is not JSON is REMOTE_ERROR with its status", async () => {
    const server = await fake(() => undefined, {
      models: (_req, res) => {
        res.writeHead(200, { "content-type": "text/html" });
        res.end("<html>login page</html>");
      },
    });
    const error = await assertCode(loadRemoteModel(server.url), "REMOTE_ERROR");
    assert.match(error.message, /not JSON/);
  });

  test("an answer declaring more than the size limit is refused before it is read", async () => {
    const server = await fake(() => undefined, {
      models: (_req, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": String(200 << 20) });
        res.write("{");
      },
    });
    const error = await assertCode(loadRemoteModel(server.url, { remote: { timeoutMs: 2_000 } }), "REMOTE_ERROR");
    assert.match(error.message, /larger than/);
  });
});

describe("remote: error answers", () => {
  test("an HTTP error carries the status and the server's message; a context overflow is CONTEXT_OVERFLOW", async () => {
    const server = await fake((req, res) => {
      if (String(req.body?.prompt).length > 10) {
        return json(res, 400, { error: { code: 400, message: "request (300 tokens) exceeds the available context size (128 tokens)", type: "exceed_context_size_error" } });
      }
      json(res, 401, { error: { message: "invalid api key", type: "authentication_error" } });
    });
    await using model = await loadRemoteModel(server.url);
    const error = await assertCode(model.generateText("x", greedy), "REMOTE_ERROR");
    assert.equal((error as InferenceError).details.status, 401);
    assert.equal((error as InferenceError).details.serverMessage, "invalid api key");
    await assertCode(model.generateText("a much longer prompt", greedy), "CONTEXT_OVERFLOW");
  });

  test("an error event inside a stream is typed like an HTTP error", async () => {
    const server = await fake((_req, res) => {
      openSse(res);
      res.end(`data: ${JSON.stringify({ error: { code: 500, message: "slot crashed", type: "server_error" } })}\n\n`);
    });
    await using model = await loadRemoteModel(server.url);
    const error = await assertCode(model.generateText("x", greedy), "REMOTE_ERROR");
    assert.match(error.message, /slot crashed/);
  });
});

describe("remote: recovery", () => {
  test("the model fails while its server is down and works again once it is back", async () => {
    const handler = (_req: unknown, res: Parameters<typeof streamTokens>[0]) => streamTokens(res, ["Once", " upon"]);
    const first = await startFake(handler);
    let model: TextModel | undefined;
    try {
      model = await loadRemoteModel(first.url, { remote: { maxRetries: 0 } });
      assert.equal((await model.generateText("x", greedy)).text, "Once upon");
      await first.close();
      await assertCode(model.generateText("x", greedy), "REMOTE_UNAVAILABLE");
      assert.ok(isInferenceError(model.err(), "REMOTE_UNAVAILABLE"));
      const again = await fake(handler, { port: first.port });
      assert.equal((await model.generateText("x", greedy)).text, "Once upon");
      assert.equal(model.err(), undefined);
      assert.equal(again.completions().length, 1);
    } finally {
      await model?.close();
    }
  });
});
