import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { createServer, type InferServer } from "../src/index.js";
import { FakeModel } from "./fake-model.js";

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/**
 * Sends `bytes` over a plain TCP connection (then `thenEvery20Ms` every 20 ms, a client that goes on
 * sending) and resolves with all the server wrote before it closed.
 */
function rawExchange(port: number, bytes: string, giveUpMs = 5_000, thenEvery20Ms?: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    const sending = thenEvery20Ms && setInterval(() => socket.writable && socket.write(thenEvery20Ms), 20);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open past ${giveUpMs} ms; it wrote ${JSON.stringify(received.slice(0, 2000))}`));
    }, giveUpMs);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearInterval(sending);
      clearTimeout(timer);
      resolve(received);
    });
    socket.write(bytes);
  });
}

/** The status and parsed JSON body of a raw HTTP/1.1 response. */
function parseRaw(raw: string): { status: number; headers: string; body: ErrorBody } {
  const split = raw.indexOf("\r\n\r\n");
  assert.ok(split > 0, `no HTTP response in ${JSON.stringify(raw)}`);
  const head = raw.slice(0, split);
  assert.match(head, /content-type: application\/json/i);
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), headers: head, body: JSON.parse(raw.slice(split + 4)) as ErrorBody };
}

function assertOpenAIError(body: ErrorBody): void {
  assert.equal(typeof body.error.message, "string");
  assert.equal(typeof body.error.type, "string");
  assert.ok("param" in body.error && "code" in body.error, JSON.stringify(body));
}

describe("the server refuses bad input in OpenAI's error shape", () => {
  let server: InferServer;
  let url: string;
  let port: number;
  before(async () => {
    server = createServer({ models: { story: new FakeModel() }, requestTimeoutMs: 300 });
    ({ url, port } = await server.listen(0, "127.0.0.1"));
  });
  after(() => server.close());

  const post = async (path: string, body: string) => {
    const res = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
    return { status: res.status, body: (await res.json()) as ErrorBody };
  };

  test("a broken percent-escape in a model id: 400, not 500", async () => {
    const res = await fetch(`${url}/v1/models/%E0%A4%A`);
    assert.equal(res.status, 400);
    const body = (await res.json()) as ErrorBody;
    assertOpenAIError(body);
    assert.equal(body.error.param, "model");
    assert.equal((await fetch(`${url}/v1/models/story`)).status, 200);
  });

  test("a wrong method: 405 with Allow; an unknown path: 404", async () => {
    const cases: [string, string, string][] = [
      ["DELETE", "/v1/models", "GET"],
      ["POST", "/v1/models/story", "GET"],
      ["POST", "/health", "GET"],
      ["PUT", "/metrics", "GET"],
      ["GET", "/v1/chat/completions", "POST"],
      ["DELETE", "/v1/completions", "POST"],
      ["GET", "/v1/embeddings", "POST"],
    ];
    for (const [method, path, allow] of cases) {
      const res = await fetch(`${url}${path}`, { method });
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
      const body = (await res.json()) as ErrorBody;
      assertOpenAIError(body);
      assert.equal(body.error.code, "method_not_allowed");
    }
    assert.equal((await fetch(`${url}/v1/nothing`, { method: "DELETE" })).status, 404);
    assert.equal((await fetch(`${url}/v1/models`, { method: "HEAD" })).status, 200);
  });

  test("'stream' and 'echo' that are not booleans: 400 naming the field", async () => {
    const chat = await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "x" }], stream: "yes" }));
    assert.equal(chat.status, 400);
    assert.equal(chat.body.error.param, "stream");
    assert.match(chat.body.error.message, /boolean/);
    const text = await post("/v1/completions", JSON.stringify({ prompt: "x", echo: 1 }));
    assert.equal(text.status, 400);
    assert.equal(text.body.error.param, "echo");
    const usage = await post("/v1/completions", JSON.stringify({ prompt: "x", stream: true, stream_options: { include_usage: "yes" } }));
    assert.equal(usage.status, 400);
    assert.equal(usage.body.error.param, "stream_options.include_usage");
  });

  test("a number too large for a double: 400 saying it is not finite", async () => {
    const res = await post("/v1/chat/completions", '{"messages":[{"role":"user","content":"x"}],"temperature":1e309}');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.param, "temperature");
    assert.match(res.body.error.message, /finite/);
    assert.doesNotMatch(res.body.error.message, /null/);
  });

  test("node's HTTP parser errors: 400 or 431 with an OpenAI error body", async () => {
    const badChunk = await rawExchange(port, "POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n");
    const badLength = await rawExchange(port, "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: ten\r\n\r\n{}");
    const hugeHeaders = await rawExchange(port, `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(64 * 1024)}\r\n\r\n`);
    for (const [raw, status] of [
      [badChunk, 400],
      [badLength, 400],
      [hugeHeaders, 431],
    ] as const) {
      const answer = parseRaw(raw);
      assert.equal(answer.status, status, raw);
      assertOpenAIError(answer.body);
    }
  });

  test("requests the HTTP parser refuses count once in infer_requests_total, with the status the client got", async () => {
    const metrics = async () => await (await fetch(`${url}/metrics`)).text();
    const count = (text: string, endpoint: string, status: string) =>
      Number(new RegExp(`^infer_requests_total\\{endpoint="${endpoint}",status="${status}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
    const before = await metrics();
    // Refused in its headers: no route saw it.
    assert.equal(parseRaw(await rawExchange(port, `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(64 * 1024)}\r\n\r\n`)).status, 431);
    // Refused in its body: its route counts the 400, not an abort.
    const badChunk = "POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n";
    assert.equal(parseRaw(await rawExchange(port, badChunk)).status, 400);
    const after = await metrics();
    assert.equal(count(after, "other", "431"), count(before, "other", "431") + 1);
    assert.equal(count(after, "/v1/completions", "400"), count(before, "/v1/completions", "400") + 1);
    assert.equal(count(after, "/v1/completions", "aborted"), count(before, "/v1/completions", "aborted"));
    assert.equal(count(after, "other", "400"), count(before, "other", "400"));
  });

  test("a client that leaves in the middle of a body after its 413 gets no phantom 400", async () => {
    const metrics = async () => await (await fetch(`${url}/metrics`)).text();
    const before = await metrics();
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.setEncoding("utf8");
      socket.write(`POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: ${64 << 20}\r\n\r\n{"prompt":`);
      socket.once("data", (text: string) => {
        socket.end(); // gone half way through the body it announced
        resolve(text);
      });
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await metrics();
    const other400 = (text: string) => Number(/^infer_requests_total\{endpoint="other",status="400"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    assert.equal(other400(after), other400(before));
  });

  test("a 413 whose body keeps coming is the connection's only answer; the connection closes; the server serves on", async () => {
    // Kept alive, the connection drained the body and got a second answer (408) when it never ended; closed
    // at once, unread bytes would reset it. Its own server: a small body limit, and a request timeout far
    // beyond the test, so only the close ends the connection.
    const own = createServer({ models: { story: new FakeModel() }, maxBodyBytes: 1024, requestTimeoutMs: 120_000 });
    const { port: ownPort, url: ownUrl } = await own.listen(0, "127.0.0.1");
    try {
      const chunk = Buffer.concat([Buffer.from("10000\r\n"), Buffer.alloc(0x10000, 0x61), Buffer.from("\r\n")]);
      // A client that goes on sending its body until the server closes: only the close ends the exchange.
      const head = "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
      const answer = await rawExchange(ownPort, head, 10_000, chunk);
      // Node has detached req.socket by the time such a response closes: the close handler must not need it.
      const { status, headers } = parseRaw(answer);
      assert.equal(status, 413);
      assert.match(headers, /^connection: close$/im);
      assert.equal((await fetch(`${ownUrl}/v1/models/story`)).status, 200);
    } finally {
      await own.close();
    }
  });

  test("a body that stalls halfway gets 408 after the request timeout", async () => {
    const started = performance.now();
    const raw = await rawExchange(port, 'POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"prompt":');
    const answer = parseRaw(raw);
    assert.equal(answer.status, 408);
    assert.equal(answer.body.error.code, "request_timeout");
    assert.ok(performance.now() - started < 4_000, "the timeout given to the server held");
  });
});
