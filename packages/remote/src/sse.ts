import { abortedError, isInferenceError } from "@infer/core";
import { remoteError, unavailable } from "./failures.js";

/** What `readEvents` needs beyond the body: limits, the signal, the URL for messages. */
export interface SseLimits {
  url: string;
  /** Longest wait for the next bytes (ms): a silent server fails the stream, it never hangs it. */
  idleMs: number;
  /** Largest single event (bytes); more is a broken or hostile server. */
  maxEventBytes: number;
  signal: AbortSignal;
}

/**
 * The JSON payloads of a server-sent-events body, in order, until `[DONE]`.
 * Returns true when the stream ended with `[DONE]`, false when the body just
 * ended (the caller decides whether that was the server dying). A payload that
 * is not JSON, an event over the size limit, a read error and silence longer
 * than `idleMs` each throw a typed error; returning early cancels the body.
 */
export async function* readEvents(body: ReadableStream<Uint8Array>, limits: SseLimits): AsyncGenerator<unknown, boolean, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let dataLength = 0;
  try {
    for (;;) {
      const chunk = await readWithin(reader, limits);
      if (chunk === undefined) return false;
      buffer += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).replace(/\r$/, "");
        buffer = buffer.slice(newline + 1);
        if (line === "") {
          if (data.length === 0) continue;
          const payload = data.join("\n");
          data = [];
          dataLength = 0;
          if (payload.trim() === "[DONE]") return true;
          yield parsePayload(payload, limits.url);
        } else if (line.startsWith("data:")) {
          const value = line.slice(line.startsWith("data: ") ? 6 : 5);
          dataLength += value.length;
          data.push(value);
        }
        // Comments (":"), "event:", "id:" and "retry:" lines carry nothing the contract needs.
      }
      if (buffer.length + dataLength > limits.maxEventBytes) {
        throw remoteError(limits.url, `a streamed event is larger than ${limits.maxEventBytes} bytes`, { limit: limits.maxEventBytes });
      }
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

function parsePayload(payload: string, url: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    throw remoteError(url, `malformed server-sent event (not JSON): ${JSON.stringify(payload.slice(0, 120))}`);
  }
}

/** The next chunk, undefined at the end; fails on abort, a read error or `idleMs` of silence. */
async function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, limits: SseLimits): Promise<Uint8Array | undefined> {
  if (limits.signal.aborted) throw abortedError(limits.signal.reason);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(unavailable(limits.url, `sent nothing for ${limits.idleMs} ms mid-stream (timeoutMs)`, { timeoutMs: limits.idleMs })),
      limits.idleMs,
    );
    onAbort = () => reject(abortedError(limits.signal.reason));
    limits.signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const { done, value } = await Promise.race([reader.read(), stopped]);
    return done ? undefined : value;
  } catch (error) {
    if (isInferenceError(error)) throw error;
    throw unavailable(limits.url, `the connection broke mid-stream: ${error instanceof Error ? error.message : String(error)}`, {}, error);
  } finally {
    clearTimeout(timer);
    limits.signal.removeEventListener("abort", onAbort!);
  }
}
