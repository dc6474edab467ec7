import type { IncomingMessage, ServerResponse } from "node:http";
import { HttpError } from "./errors.js";

/**
 * Reads a JSON request body, refusing more than `limit` bytes: early from
 * Content-Length, otherwise as soon as the stream passes the limit, so an
 * oversized body is never held in memory.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim().length === 0) throw new HttpError(400, "the request body is empty; send a JSON object", "invalid_request_error", "invalid_json");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HttpError(
      400,
      `the request body is not valid JSON: ${(error as Error).message}`,
      "invalid_request_error",
      "invalid_json",
    );
  }
}

/**
 * The rest of a refused body is not read: the connection closes after the answer. Kept alive, Node would
 * drain the body to find the next request, and one that never ends would get a second answer (408) on it.
 */
function tooLarge(limit: number): HttpError {
  return new HttpError(413, `the request body is larger than ${limit} bytes`, "invalid_request_error", "request_too_large", null, {
    connection: "close",
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  sendJson(res, error.status, error.body(), error.headers);
}

/** Server-sent events in OpenAI's dialect: `data: <json>` lines, ending with `data: [DONE]`. */
export class SseWriter {
  constructor(private readonly res: ServerResponse) {}

  open(): void {
    this.res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    this.res.flushHeaders();
  }

  get closed(): boolean {
    return this.res.writableEnded || this.res.destroyed;
  }

  send(data: unknown): void {
    if (!this.closed) this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** Ends the stream without [DONE] (after an in-band error). */
  end(): void {
    if (!this.closed) this.res.end();
  }

  done(): void {
    if (this.closed) return;
    this.res.write("data: [DONE]\n\n");
    this.res.end();
  }
}
