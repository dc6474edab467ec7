import { abortedError, isInferenceError } from "@infer/core";
import { connectionFailure, remoteError, RETRIED_STATUSES, retryAfterMs, statusFailure, unavailable } from "./failures.js";
import { readEvents } from "./sse.js";

/** Largest whole JSON answer read (full-vocabulary log-probabilities of a big vocabulary fit). */
export const MAX_JSON_BYTES = 64 << 20;
/** Largest single streamed event. */
export const MAX_EVENT_BYTES = 16 << 20;
/** Backoff between retries: doubling from the first, capped, each scaled by a random 50-100% (jitter). */
const BACKOFF_FIRST_MS = 200;
const BACKOFF_CAP_MS = 5_000;

export interface ConnectionSettings {
  headers: Record<string, string>;
  /** Bound on everything before a response (connecting, retries, their waits) and on each silence after. */
  timeoutMs: number;
  maxRetries: number;
}

export interface JsonAnswer {
  status: number;
  body: unknown;
}

/** An open SSE answer: its events (see `readEvents`). */
export type EventStream = AsyncGenerator<unknown, boolean, undefined>;

/**
 * HTTP to one server: JSON requests and SSE streams, each bounded by
 * `timeoutMs`, retried (bounded exponential backoff with jitter, honouring
 * `Retry-After`) while the server refuses connections or says it is busy. A
 * stream is never retried once it is open: tokens may have been generated.
 */
export class HttpClient {
  constructor(private readonly settings: ConnectionSettings) {}

  /** A JSON request; `allowStatus` lists error statuses returned to the caller instead of thrown. */
  async json(url: string, body: unknown | undefined, signal: AbortSignal, allowStatus: readonly number[] = []): Promise<JsonAnswer> {
    return this.withRetries(url, body, signal, async (response, attemptSignal) => {
      const text = await readText(response, url, attemptSignal);
      const parsed = parseJson(text);
      if (response.status >= 400 && !allowStatus.includes(response.status)) {
        throw statusFailure(url, response.status, parsed, text);
      }
      if (parsed === undefined) {
        throw remoteError(url, `answered HTTP ${response.status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 120))}`, {
          status: response.status,
        });
      }
      return { status: response.status, body: parsed };
    });
  }

  /** A streaming request: resolves once the server answered 2xx, with its events. */
  async stream(url: string, body: unknown, signal: AbortSignal): Promise<EventStream> {
    return this.withRetries(url, body, signal, async (response, _attemptSignal, finishAttempt) => {
      if (response.status >= 400) {
        const text = await readText(response, url, signal);
        throw statusFailure(url, response.status, parseJson(text), text);
      }
      if (!response.body) throw remoteError(url, `answered HTTP ${response.status} without a body`, { status: response.status });
      // From here on silence is bounded per read, not by the attempt's deadline.
      finishAttempt();
      return readEvents(response.body, { url, idleMs: this.settings.timeoutMs, maxEventBytes: MAX_EVENT_BYTES, signal });
    });
  }

  /**
   * Runs one request, retrying refusals and busy answers until `maxRetries`
   * or the `timeoutMs` deadline, whichever comes first. `handle` reads the
   * response; what it throws ends the call (a retried status is judged here).
   */
  private async withRetries<T>(
    url: string,
    body: unknown | undefined,
    signal: AbortSignal,
    handle: (response: Response, attemptSignal: AbortSignal, finishAttempt: () => void) => Promise<T>,
  ): Promise<T> {
    const deadline = Date.now() + this.settings.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw abortedError(signal.reason);
      const timer = new AbortController();
      const timeout = setTimeout(() => timer.abort(), Math.max(1, deadline - Date.now()));
      const attemptSignal = AbortSignal.any([signal, timer.signal]);
      let waitMs: number | undefined;
      let failure: unknown;
      try {
        const response = await fetch(url, {
          method: body === undefined ? "GET" : "POST",
          headers: body === undefined ? this.settings.headers : { ...this.settings.headers, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: attemptSignal,
        });
        if (RETRIED_STATUSES.has(response.status) && attempt < this.settings.maxRetries) {
          waitMs = retryAfterMs(response.headers.get("retry-after")) ?? backoff(attempt);
          failure = statusFailure(url, response.status, undefined, `HTTP ${response.status}`, waitMs);
          await response.body?.cancel().catch(() => undefined);
        } else {
          return await handle(response, attemptSignal, () => clearTimeout(timeout));
        }
      } catch (error) {
        if (signal.aborted) throw abortedError(signal.reason);
        if (timer.signal.aborted) {
          throw unavailable(url, `no answer within timeoutMs (${this.settings.timeoutMs} ms, ${attempt + 1} attempt(s))`, {
            timeoutMs: this.settings.timeoutMs,
            attempts: attempt + 1,
          });
        }
        if (isInferenceError(error)) throw error;
        const { error: typed, retry } = connectionFailure(url, error);
        if (!retry || attempt >= this.settings.maxRetries) throw typed;
        failure = typed;
        waitMs = backoff(attempt);
      } finally {
        clearTimeout(timeout);
      }
      if (Date.now() + waitMs > deadline) {
        // Waiting as asked would outlast timeoutMs: fail now with what the server said.
        throw failure;
      }
      await sleep(waitMs, signal);
    }
  }
}

function backoff(attempt: number): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** attempt);
  return Math.round(ceiling * (0.5 + Math.random() * 0.5));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The body as text, refusing more than MAX_JSON_BYTES (read as it arrives, so a huge answer is not buffered whole). */
async function readText(response: Response, url: string, signal: AbortSignal): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  const tooLarge = () => remoteError(url, `the answer is larger than ${MAX_JSON_BYTES} bytes`, { limit: MAX_JSON_BYTES, status: response.status });
  if (declared > MAX_JSON_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  try {
    for (;;) {
      if (signal.aborted) throw abortedError(signal.reason);
      const { done, value } = await reader.read();
      if (done) return text + decoder.decode();
      bytes += value.byteLength;
      if (bytes > MAX_JSON_BYTES) throw tooLarge();
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}
