// Small HTTP helpers for the soak: fetch with a deadline, SSE reading, the OpenAI error shape,
// raw sockets for requests fetch cannot send, and Prometheus text.
import { connect } from "node:net";

/** fetch that gives up after `timeoutMs` (the soak never waits unbounded). */
export async function timedFetch(url, init = {}, timeoutMs = 60_000) {
  const signal = init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
  return fetch(url, { ...init, signal });
}

export function postJson(url, body, init = {}) {
  return timedFetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), ...init });
}

/** Why `body` is not OpenAI's error shape, or undefined when it is. */
export function errorShapeProblem(body) {
  const e = body?.error;
  if (typeof e !== "object" || e === null) return "no error object";
  if (typeof e.message !== "string" || e.message === "") return "error.message is not a non-empty string";
  if (typeof e.type !== "string") return "error.type is not a string";
  if (!("code" in e) || !("param" in e)) return "error.code or error.param is missing";
  return undefined;
}

/**
 * Reads an SSE response event by event; `onEvent(data)` gets each parsed `data:` payload
 * (the string "[DONE]" as is) and may return true to stop reading (the caller then aborts).
 */
export async function readSse(res, onEvent) {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6))
        .join("\n");
      if (data === "") continue;
      if (onEvent(data === "[DONE]" ? data : JSON.parse(data))) return "stopped";
    }
  }
  if (buffered.trim() !== "") throw new Error(`the stream ended inside an event: ${JSON.stringify(buffered.slice(0, 200))}`);
  return "ended";
}

/**
 * Sends `chunks` (strings or Buffers) over a raw loopback connection, `gapMs` apart, and resolves
 * with the status line's code and the body it got back (or `status: 0` when the connection closed
 * without an answer). The whole exchange is bounded by `timeoutMs`.
 */
export function rawRequest(url, chunks, { gapMs = 0, timeoutMs = 60_000 } = {}) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const received = [];
    let timer;
    let gapTimer;
    let over = false;
    const done = (error) => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      clearTimeout(gapTimer);
      socket.destroy();
      if (error) return reject(error);
      const text = Buffer.concat(received).toString("utf8");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const bodyAt = text.indexOf("\r\n\r\n");
      resolve({ status, head: bodyAt >= 0 ? text.slice(0, bodyAt) : text, body: bodyAt >= 0 ? text.slice(bodyAt + 4) : "" });
    };
    timer = setTimeout(() => done(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    socket.on("data", (bytes) => {
      received.push(bytes);
      // A kept-alive connection does not end after the answer: stop once its whole body is here.
      const text = Buffer.concat(received).toString("latin1");
      const bodyAt = text.indexOf("\r\n\r\n");
      const length = /^content-length: *(\d+)$/im.exec(text.slice(0, bodyAt))?.[1];
      if (bodyAt >= 0 && length !== undefined && text.length - bodyAt - 4 >= Number(length)) done();
    });
    socket.on("end", () => done());
    socket.on("close", () => done());
    // A server that answers early and resets the rest of an upload is fine: keep what arrived.
    socket.on("error", (error) => (received.length ? done() : done(error)));
    let i = 0;
    const next = () => {
      if (i >= chunks.length || socket.destroyed) return;
      socket.write(chunks[i++]);
      if (i < chunks.length) gapTimer = setTimeout(next, gapMs);
    };
    socket.once("connect", next);
  });
}

/** The samples of a Prometheus text, as "name{labels}" -> value. */
export function parseMetrics(text) {
  const values = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

export async function scrape(url) {
  const res = await timedFetch(`${url}/metrics`, {}, 30_000);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}
