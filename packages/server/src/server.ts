import { randomUUID, timingSafeEqual } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { capabilitiesOf, isEmbeddingModel, isProbedModel, isTokenizerModel, type ModelService, ProbeMetrics, type TextModel } from "@infer/core";
import { Batcher } from "./batcher.js";
import { answerClientErrors, type ConnectionTimeouts, httpServerOptions, lingerWhenClosing } from "./connection.js";
import { HttpError, toHttpError } from "./errors.js";
import { readJsonBody, sendError, sendJson } from "./http-io.js";
import { ServerMetrics } from "./metrics.js";
import { SlotQueue } from "./queue.js";
import { parseChatRequest, parseEmbeddingRequest, parseTextRequest } from "./requests.js";
import { type Served, runCompletion } from "./completions.js";

export interface ServerOptions extends ConnectionTimeouts {
  /** The models served, by the name clients put in `model`. */
  models: Record<string, TextModel>;
  /** When set, every /v1 and /metrics request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Requests that may wait per model behind the running ones; more get 429 (default 64). */
  maxQueue?: number;
  /** Largest accepted request body in bytes; more gets 413 (default 4 MiB). */
  maxBodyBytes?: number;
  /**
   * Generations (batches) per model at once (default 1). BaseTextModel runs one
   * call at a time, so more only helps backends whose models decode calls together.
   */
  parallel?: number;
  /**
   * Most completions (chat and text, streaming or not) decoded together in
   * one `batchGenerate` (default 8; 1 turns batching off: each request then
   * runs alone in a slot). Requests batch when they wait for the same model
   * with equal batch-wide options (sampling, seed, logprobs, response_format);
   * `max_tokens` and `stop` may differ.
   */
  maxBatch?: number;
  /** Jinja chat templates by model name, used instead of (or for models without) the model's own. */
  chatTemplates?: Record<string, string>;
  /** The model service behind `models` (see `servedModel`), whose status /health then reports. */
  service?: Pick<ModelService, "status">;
  /** Receives one line per finished request (default: nothing). */
  log?: (line: string) => void;
}

export interface ListenAddress {
  host: string;
  port: number;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
}

export interface InferServer {
  /** The underlying node:http server. */
  readonly http: Server;
  /** Starts listening (port 0 picks a free one) and resolves with where. */
  listen(port?: number, host?: string): Promise<ListenAddress>;
  /** Aborts running generations, drops connections and stops listening. Models stay open. */
  close(): Promise<void>;
}

const DEFAULT_MAX_QUEUE = 64;
const DEFAULT_MAX_BODY = 4 * 1024 * 1024;
const DEFAULT_MAX_BATCH = 8;

/** An OpenAI-compatible HTTP server over the given models. */
export function createServer(options: ServerOptions): InferServer {
  const names = Object.keys(options.models);
  if (names.length === 0) throw new TypeError("createServer needs at least one model in `models`");
  for (const name of Object.keys(options.chatTemplates ?? {})) {
    if (!names.includes(name)) throw new TypeError(`chatTemplates names '${name}', which is not in \`models\``);
  }
  const created = Math.floor(Date.now() / 1000);
  const metrics = new ServerMetrics();
  const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
  const served = new Map<string, Served>(
    names.map((name) => {
      const model = options.models[name]!;
      const queue = new SlotQueue(options.parallel ?? 1, options.maxQueue ?? DEFAULT_MAX_QUEUE);
      const chatTemplate = options.chatTemplates?.[name];
      const batcher = maxBatch > 1 ? new Batcher(model, queue, maxBatch, (size) => metrics.countBatch(name, size), chatTemplate) : undefined;
      return [name, { name, model, queue, batcher, chatTemplate }];
    }),
  );
  // A metrics sink on each model that takes one, so /metrics shows what the models measure themselves.
  const probeMetrics = new Map<string, ProbeMetrics>();
  const detachProbes: (() => void)[] = [];
  for (const { name, model } of served.values()) {
    if (!isProbedModel(model)) continue;
    const sink = new ProbeMetrics();
    probeMetrics.set(name, sink);
    detachProbes.push(model.attachProbe(sink));
  }
  const inFlight = new Set<AbortController>();
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY;

  function pick(name: string | undefined): Served {
    if (name === undefined) {
      if (served.size === 1) return served.values().next().value!;
      throw new HttpError(400, `'model' is required; this server serves ${names.join(", ")}`, "invalid_request_error", "missing_model", "model");
    }
    const found = served.get(name);
    if (!found) {
      throw new HttpError(
        404,
        `the model '${name}' does not exist on this server (served: ${names.join(", ")})`,
        "invalid_request_error",
        "model_not_found",
        "model",
      );
    }
    return found;
  }

  function authorized(req: IncomingMessage): boolean {
    if (options.apiKey === undefined) return true;
    const header = req.headers.authorization ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match) return false;
    const given = Buffer.from(match[1]!.trim());
    const wanted = Buffer.from(options.apiKey);
    return given.length === wanted.length && timingSafeEqual(given, wanted);
  }

  async function route(req: IncomingMessage, res: ServerResponse, path: string, signal: AbortSignal): Promise<void> {
    const method = req.method ?? "GET";
    const allowed = methodsOf(path);
    if (allowed === undefined) throw new HttpError(404, `no route ${method} ${path}`, "invalid_request_error", "not_found");
    // HEAD is GET without the body; node:http drops the body itself.
    if (!allowed.includes(method === "HEAD" ? "GET" : method)) {
      throw new HttpError(405, `${path} takes ${allowed.join(" or ")}, not ${method}`, "invalid_request_error", "method_not_allowed", null, {
        allow: allowed.join(", "),
      });
    }
    if (path === "/health") {
      sendJson(res, 200, { status: "ok", models: names, ...(options.service && { loaded: options.service.status() }) });
      return;
    }
    if (!authorized(req)) {
      throw new HttpError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "invalid_request_error", "invalid_api_key", null, {
        "www-authenticate": "Bearer",
      });
    }
    const post = async (handler: (body: unknown) => Promise<void>) => handler(await readJsonBody(req, maxBody));
    switch (path) {
      case "/metrics":
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
        res.end(
          metrics.render(
            [...served.values()].map((s) => ({ model: s.name, queued: s.queue.depth, active: s.queue.active })),
            [...probeMetrics].map(([model, sink]) => ({ model, figures: sink.snapshot() })),
            process.memoryUsage(),
          ),
        );
        return;
      case "/v1/models":
        sendJson(res, 200, { object: "list", data: names.map((id) => modelCard(id, created, served.get(id)!.model)) });
        return;
      case "/v1/chat/completions":
        return post(async (body) => {
          const request = parseChatRequest(body);
          await runCompletion("chat", pick(request.model), request, res, signal, metrics);
        });
      case "/v1/completions":
        return post(async (body) => {
          const request = parseTextRequest(body);
          await runCompletion("text", pick(request.model), request, res, signal, metrics);
        });
      case "/v1/embeddings":
        return post(async (body) => {
          const request = parseEmbeddingRequest(body);
          await runEmbeddings(pick(request.model), request, res, signal);
        });
    }
    const target = pick(modelIdOf(path));
    sendJson(res, 200, modelCard(target.name, created, target.model));
  }

  async function runEmbeddings(
    target: Served,
    request: ReturnType<typeof parseEmbeddingRequest>,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const { model } = target;
    const status = capabilitiesOf(model).embeddings;
    if (!isEmbeddingModel(model) || (status !== "supported" && status !== "experimental")) {
      throw new HttpError(
        400,
        `the model '${target.name}' (backend ${model.backend}) does not produce embeddings`,
        "invalid_request_error",
        "embeddings_unsupported",
        "model",
      );
    }
    const release = await target.queue.acquire(signal);
    try {
      const vectors = await model.embed(request.input, { signal });
      // The model's own tokenizer counts the input; a model without one reports 0.
      const promptTokens = isTokenizerModel(model) ? request.input.reduce((sum, text) => sum + model.encode(text).length, 0) : 0;
      metrics.promptTokens.add({ model: target.name }, promptTokens);
      sendJson(res, 200, {
        object: "list",
        model: target.name,
        data: vectors.map((v, index) => ({
          object: "embedding",
          index,
          embedding: request.encoding === "base64" ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") : Array.from(v),
        })),
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
      });
    } finally {
      release();
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    responses.set(req.socket, res);
    const path = new URL(req.url ?? "/", "http://localhost").pathname.replace(/\/+$/, "") || "/";
    const controller = new AbortController();
    inFlight.add(controller);
    res.setHeader("access-control-allow-origin", "*");
    res.setHeader("x-request-id", randomUUID());
    // A client that goes away before the answer is complete aborts its generation, as soon as its FIN
    // arrives: Node closes the response only once its own FIN is out, a turn or more later, while the
    // generation would go on decoding. HTTP/1.1 clients do not half-close while they wait for an answer
    // (Node's server ends such a connection itself; nginx logs 499).
    let left = false;
    const clientLeft = () => {
      if (res.writableFinished) return;
      left = true;
      controller.abort(new Error("the client disconnected"));
    };
    // Kept: Node detaches req.socket (null) by the time the response closes.
    const socket = req.socket;
    socket.once("end", clientLeft);
    res.on("close", () => {
      socket.off("end", clientLeft);
      clientLeft();
      inFlight.delete(controller);
      const endpoint = Object.hasOwn(ROUTE_METHODS, path) ? path : "other";
      const status = res.writableFinished ? String(res.statusCode) : String(refused.get(res) ?? "aborted");
      metrics.requests.add({ endpoint, status });
      metrics.latency.observe({ endpoint }, (performance.now() - started) / 1000);
      options.log?.(`${req.method} ${path} ${status} ${Math.round(performance.now() - started)}ms`);
    });
    if (req.method === "OPTIONS") {
      res.writeHead(204, {
        "access-control-allow-methods": [...(methodsOf(path) ?? ["GET", "POST"]), "OPTIONS"].join(", "),
        "access-control-allow-headers": "authorization, content-type",
      });
      res.end();
      return;
    }
    try {
      await route(req, res, path, controller.signal);
    } catch (error) {
      if (left || (controller.signal.aborted && !res.writable)) return;
      const answer = toHttpError(error);
      // An answer that closes the connection before the whole body arrived (413) closes it lingering.
      if (answer.headers.connection === "close" && !req.complete) lingerWhenClosing(socket);
      sendError(res, answer);
    }
  }

  const http = createHttpServer(httpServerOptions(options), (req, res) => void handle(req, res));
  // The response each connection is on, so that a parse error after it began only closes the connection.
  const responses = new WeakMap<Socket, ServerResponse>();
  // Responses whose request the parser refused part way (e.g. bad chunking in the body), by the status the client got.
  const refused = new WeakMap<ServerResponse, number>();
  answerClientErrors(
    http,
    (socket) => {
      const res = responses.get(socket);
      return res !== undefined && res.headersSent && !res.writableFinished;
    },
    (status, socket) => {
      // A request refused in its body has a route's response, whose close counts it; one refused in its headers has no path.
      const res = responses.get(socket);
      if (res !== undefined && !res.writableFinished) refused.set(res, status);
      else metrics.requests.add({ endpoint: "other", status: String(status) });
    },
  );

  return {
    http,
    listen(port = 8080, host = "127.0.0.1") {
      return new Promise((resolve, reject) => {
        http.once("error", reject);
        http.listen(port, host, () => {
          http.off("error", reject);
          const address = http.address() as AddressInfo;
          const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
          resolve({ host: address.address, port: address.port, url: `http://${shownHost}:${address.port}` });
        });
      });
    },
    async close() {
      for (const detach of detachProbes.splice(0)) detach();
      for (const controller of inFlight) controller.abort(new Error("the server is shutting down"));
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    },
  };
}

/** The methods a path answers to; undefined for no such route. */
function methodsOf(path: string): string[] | undefined {
  if (path.startsWith("/v1/models/")) return ["GET"];
  return ROUTE_METHODS[path];
}

const ROUTE_METHODS: Record<string, string[]> = {
  "/health": ["GET"],
  "/metrics": ["GET"],
  "/v1/models": ["GET"],
  "/v1/chat/completions": ["POST"],
  "/v1/completions": ["POST"],
  "/v1/embeddings": ["POST"],
};

/** The model id in /v1/models/<id>, percent-decoded; a broken escape is the client's error. */
function modelIdOf(path: string): string {
  const raw = path.slice("/v1/models/".length);
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpError(400, `the model id in the path is not valid percent-encoding: '${raw}'`, "invalid_request_error", "invalid_path", "model");
  }
}

/** A /v1/models entry; `meta` (llama-server's names) tells clients such as backend remote the model's shape. */
function modelCard(id: string, created: number, model: TextModel) {
  const info = model.info();
  const meta = { n_vocab: info.vocabSize, n_ctx: info.contextLength, n_embd: info.hiddenSize, n_ctx_train: info.trainedContextLength, n_params: info.parameters };
  return { id, object: "model", created, owned_by: "infer", meta };
}
