import { abortedError } from "@infer/core";
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
  const watch = new Watch(reader, limits);
  let buffer = "";
  let data: string[] = [];
  let dataLength = 0;
  try {
    for (;;) {
      const chunk = await watch.read();
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
    watch.stop();
    reader.cancel().catch(() => undefined);
  }
}

/**
 * One stream's guard: a single idle timer, restarted by each chunk, and a
 * single abort listener (per-read timers and listeners cost more than a small
 * model's token does). Either cancels the reader, which ends the pending read;
 * the read then throws the reason.
 */
class Watch {
  private readonly timer: ReturnType<typeof setTimeout>;
  private readonly onAbort: () => void;
  private failure: unknown;

  constructor(
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    private readonly limits: SseLimits,
  ) {
    this.timer = setTimeout(
      () => this.stopWith(unavailable(limits.url, `sent nothing for ${limits.idleMs} ms mid-stream (timeoutMs)`, { timeoutMs: limits.idleMs })),
      limits.idleMs,
    );
    this.onAbort = () => this.stopWith(abortedError(limits.signal.reason));
    limits.signal.addEventListener("abort", this.onAbort, { once: true });
  }

  /** The next chunk, undefined at the end; fails on abort, a read error or `idleMs` of silence. */
  async read(): Promise<Uint8Array | undefined> {
    if (this.limits.signal.aborted) throw abortedError(this.limits.signal.reason);
    let step: Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>;
    try {
      step = await this.reader.read();
    } catch (error) {
      if (this.failure !== undefined) throw this.failure;
      throw unavailable(this.limits.url, `the connection broke mid-stream: ${error instanceof Error ? error.message : String(error)}`, {}, error);
    }
    if (this.failure !== undefined) throw this.failure;
    this.timer.refresh();
    return step.done ? undefined : step.value;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.limits.signal.removeEventListener("abort", this.onAbort);
  }

  private stopWith(failure: unknown): void {
    this.failure ??= failure;
    this.reader.cancel().catch(() => undefined);
  }
}

function parsePayload(payload: string, url: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    throw remoteError(url, `malformed server-sent event (not JSON): ${JSON.stringify(payload.slice(0, 120))}`);
  }
}
