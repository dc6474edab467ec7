import { InferenceError } from "@infer/core";

/**
 * How the ways a server can fail become `InferenceError`s: unreachable or
 * overloaded is `REMOTE_UNAVAILABLE` (worth trying again later), a server that
 * answered wrongly is `REMOTE_ERROR` with its status and message, a prompt it
 * says is too long is `CONTEXT_OVERFLOW` like a local backend's.
 */

/** Socket and resolver errors after which the same request may succeed later. */
const TRANSIENT_SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_CLOSED",
]);

/** Statuses a server gives when it is busy or restarting: retried before any token arrived. */
export const RETRIED_STATUSES = new Set([429, 502, 503, 504]);

export function unavailable(url: string, message: string, details: Record<string, unknown> = {}, cause?: unknown): InferenceError {
  return new InferenceError("REMOTE_UNAVAILABLE", `remote server ${url}: ${message}`, { cause, details: { url, ...details } });
}

export function remoteError(url: string, message: string, details: Record<string, unknown> = {}): InferenceError {
  return new InferenceError("REMOTE_ERROR", `remote server ${url}: ${message}`, { details: { url, ...details } });
}

/** The socket-level code under a fetch failure (undici nests it in `cause`), if any. */
export function socketCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

/** A failure to reach the server at all (no HTTP status): whether retrying may help. */
export function connectionFailure(url: string, error: unknown): { error: InferenceError; retry: boolean } {
  const code = socketCode(error) ?? "unknown";
  const why = code === "ENOTFOUND" ? "its host name does not resolve (DNS)" : `could not be reached (${code})`;
  const message = error instanceof Error && error.cause instanceof Error ? error.cause.message : error instanceof Error ? error.message : String(error);
  return { error: unavailable(url, `${why}: ${message}`, { socketCode: code }, error), retry: TRANSIENT_SOCKET_CODES.has(code) };
}

/** The message a server put in an error body: OpenAI's `{error: {message}}`, vLLM's `{message}`, TGI's `{error: "..."}`. */
export function serverMessage(body: unknown, text: string): { message: string; type?: string; code?: string } {
  const b = body as { error?: unknown; message?: unknown; type?: unknown } | null;
  if (b && typeof b === "object") {
    if (typeof b.error === "string") return { message: b.error };
    const inner = b.error as { message?: unknown; type?: unknown; code?: unknown } | undefined;
    if (inner && typeof inner === "object" && typeof inner.message === "string") {
      return {
        message: inner.message,
        type: typeof inner.type === "string" ? inner.type : undefined,
        code: typeof inner.code === "string" ? inner.code : undefined,
      };
    }
    if (typeof b.message === "string") return { message: b.message, type: typeof b.type === "string" ? b.type : undefined };
  }
  return { message: text.slice(0, 300) || "(empty body)" };
}

/** How servers say a prompt does not fit their context. */
const CONTEXT_MESSAGES = /exceeds? the available context|maximum context length|context length|context_length_exceeded|too many tokens|prompt is too long/i;

/** An HTTP error answer (status >= 400) as the InferenceError a caller branches on. */
export function statusFailure(url: string, status: number, body: unknown, text: string, retryAfterMs?: number): InferenceError {
  const { message, type, code } = serverMessage(body, text);
  const details = { status, serverMessage: message, ...(type ? { serverType: type } : {}), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  const overflow = type === "exceed_context_size_error" || code === "context_length_exceeded" || CONTEXT_MESSAGES.test(message);
  if (status === 400 && overflow) {
    return new InferenceError("CONTEXT_OVERFLOW", `remote server ${url}: the prompt does not fit the context: ${message}`, {
      details: { url, ...details },
    });
  }
  if (RETRIED_STATUSES.has(status)) return unavailable(url, `busy or unavailable (HTTP ${status}): ${message}`, details);
  return remoteError(url, `HTTP ${status}: ${message}`, details);
}

/** `Retry-After` in ms (seconds or an HTTP date), or undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
