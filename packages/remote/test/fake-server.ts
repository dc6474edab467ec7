/**
 * A small programmable HTTP server for fault injection: it answers the probes
 * of a llama-server-like server (one model, `/props`) and hands completion
 * requests to the test's handler. Real behaviour is tested against the real
 * llama-server (llama-server.test.ts); this one fails on purpose.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { after } from "node:test";

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown> | undefined;
}

export type Handler = (request: SeenRequest, res: ServerResponse) => void | Promise<void>;

export interface FakeServer {
  url: string;
  port: number;
  /** Every request, in arrival order. */
  requests: SeenRequest[];
  /** Requests to the generation endpoints only. */
  completions(): SeenRequest[];
  close(): Promise<void>;
}

export interface FakeOptions {
  /** `owned_by` of the listed model; "llamacpp" (default) makes it a llama-server with token ids. */
  ownedBy?: string;
  port?: number;
  /** Answers GET /v1/models instead of the default listing. */
  models?: Handler;
}

export async function startFake(handler: Handler, options: FakeOptions = {}): Promise<FakeServer> {
  const requests: SeenRequest[] = [];
  const sockets = new Set<Socket>();
  const ownedBy = options.ownedBy ?? "llamacpp";
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const seen: SeenRequest = {
      method: req.method ?? "GET",
      path: (req.url ?? "/").split("?")[0]!,
      headers: req.headers,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
    };
    requests.push(seen);
    if (seen.path === "/v1/models") {
      if (options.models) return options.models(seen, res);
      return json(res, 200, { object: "list", data: [{ id: "fake-model", object: "model", owned_by: ownedBy, meta: { n_vocab: 32, n_ctx_train: 128 } }] });
    }
    if (seen.path === "/props" && ownedBy === "llamacpp") return json(res, 200, { default_generation_settings: { n_ctx: 128 }, build_info: "fake" });
    if (seen.path === "/v1/completions" || seen.path === "/v1/chat/completions") return handler(seen, res);
    json(res, 404, { error: { message: `no ${seen.path} here`, type: "not_found_error" } });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    completions: () => requests.filter((r) => r.path.endsWith("completions")),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** startFake for one test file: every server it starts is closed after that file's tests. */
export function fakesClosedAfterTests(): (...args: Parameters<typeof startFake>) => Promise<FakeServer> {
  const fakes: FakeServer[] = [];
  after(async () => {
    for (const fake of fakes) await fake.close();
  });
  return async (...args) => {
    const server = await startFake(...args);
    fakes.push(server);
    return server;
  };
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** Starts an SSE answer. */
export function openSse(res: ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
}

/** One llama-server-style completion chunk: the token's text and id, and a finish reason when it is the last. */
export function tokenEvent(res: ServerResponse, id: number, text: string, finish: string | null = null): void {
  const chunk = {
    object: "text_completion",
    choices: [{ index: 0, text, finish_reason: finish, logprobs: { content: [{ id, token: text, logprob: -0.5, top_logprobs: [] }] } }],
    timings: { prompt_n: 3, prompt_ms: 1, predicted_n: 1, predicted_ms: 1 },
  };
  res.write(`data: ${JSON.stringify(chunk)}\n\n`);
}

/** A whole successful stream of `texts` (ids 1, 2, ...), ended by "stop" and [DONE]. */
export function streamTokens(res: ServerResponse, texts: string[]): void {
  openSse(res);
  texts.forEach((text, i) => tokenEvent(res, i + 1, text));
  res.write(`data: ${JSON.stringify({ choices: [{ index: 0, text: "", finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: texts.length } })}\n\n`);
  res.end("data: [DONE]\n\n");
}
