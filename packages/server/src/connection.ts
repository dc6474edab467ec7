import type { Server } from "node:http";
import type { Socket } from "node:net";
import { HttpError } from "./errors.js";

/** How long a client may take over each part of a request, in milliseconds. */
export interface ConnectionTimeouts {
  /** To send all request headers (default 10 s); then 408 and the connection closes. */
  headersTimeoutMs?: number;
  /** To send the whole request, body included (default 30 s); then 408. The response may take longer. */
  requestTimeoutMs?: number;
  /** An idle keep-alive connection stays open this long between requests (default 5 s). */
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_TIMEOUTS: Required<ConnectionTimeouts> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
};

/** The node:http options that enforce `timeouts`. */
export function httpServerOptions(timeouts: ConnectionTimeouts) {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = { ...DEFAULT_TIMEOUTS, ...timeouts };
  return {
    // node:http refuses a headers timeout above the request timeout.
    headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    // node:http only notices an expired timeout when it checks (every 30 s by default): check often
    // enough that a short timeout holds roughly as given.
    connectionsCheckingInterval: Math.max(10, Math.min(1_000, headersTimeoutMs / 4, requestTimeoutMs / 4)),
  };
}

/** How long a connection closed under a client still sending keeps reading (and dropping) what it sends. */
const LINGER_MS = 2_000;

/**
 * Makes the close that node:http does after an answer with `connection: close` a lingering one, as
 * servers close on a client still sending its body (nginx's lingering close): our FIN after the answer,
 * then whatever the client still sends is read and dropped until it closes too or LINGER_MS pass.
 * Closed at once with body bytes unread, the connection would be reset, and a reset can discard the
 * answer before the client reads it. (node:http ends such a connection through `destroySoon`.)
 */
export function lingerWhenClosing(socket: Socket): void {
  socket.destroySoon = () => {
    socket.end();
    socket.resume();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  };
}

/** What node:http's own parser and timeouts report, as the status and OpenAI error a client gets. */
function describeClientError(error: NodeJS.ErrnoException): HttpError {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return new HttpError(431, "the request headers are too large", "invalid_request_error", "headers_too_large");
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new HttpError(408, "the request was not received in time", "invalid_request_error", "request_timeout");
    default:
      return new HttpError(400, `the HTTP request is malformed: ${error.message} (${error.code ?? "no code"})`, "invalid_request_error", "bad_http_request");
  }
}

const REASONS: Record<number, string> = { 400: "Bad Request", 408: "Request Timeout", 431: "Request Header Fields Too Large" };

/**
 * Answers requests that node:http could not parse or that timed out in the
 * OpenAI error shape rather than node's bare status line, then closes the
 * connection: after a parse error the rest of its bytes mean nothing.
 * A connection whose response has already begun, or whose client has gone,
 * is just closed. `answered` hears the status of each answer sent here, which
 * no route's response carries.
 */
export function answerClientErrors(
  http: Server,
  responseStarted: (socket: Socket) => boolean,
  answered: (status: number, socket: Socket) => void,
): void {
  http.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    // HPE_INVALID_EOF_STATE: the client closed its side in the middle of a request, so it waits for no answer.
    if (error.code === "ECONNRESET" || error.code === "HPE_INVALID_EOF_STATE" || !socket.writable || responseStarted(socket)) {
      socket.destroy();
      return;
    }
    const answer = describeClientError(error);
    answered(answer.status, socket);
    const body = JSON.stringify(answer.body());
    socket.once("finish", () => socket.destroy());
    socket.end(
      [
        `HTTP/1.1 ${answer.status} ${REASONS[answer.status]}`,
        "content-type: application/json; charset=utf-8",
        `content-length: ${Buffer.byteLength(body)}`,
        "connection: close",
        "",
        body,
      ].join("\r\n"),
    );
  });
}
