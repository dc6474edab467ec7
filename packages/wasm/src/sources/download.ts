/**
 * An http(s) download streamed with fetch into memory given by the caller, reporting progress,
 * and resumed with an HTTP Range request where the connection drops part-way (a few times at most).
 */
import { InferenceError, type LoadProgress } from "@infer/core";

export type ProgressListener = (progress: LoadProgress) => void;

/** Times a cut download is resumed before it fails. */
const MAX_RESUMES = 3;

type Reader = { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(reason?: unknown): Promise<void> };

export interface Download {
  readonly size: number;
  /** The first `count` bytes (fewer when the file is shorter), kept for readInto. */
  peek(count: number): Promise<Uint8Array>;
  /** Streams the whole file into target (target.byteLength === size). */
  readInto(target: Uint8Array): Promise<void>;
  /** Drops the connection (a file refused by its first bytes is not downloaded whole). */
  cancel(): void;
}

function aborted(url: string, signal: AbortSignal | undefined, cause: unknown): InferenceError | undefined {
  return signal?.aborted ? new InferenceError("ABORTED", `${url}: the download was aborted`, { cause, details: { url } }) : undefined;
}

/**
 * fetch with errors as InferenceErrors naming the URL: unreachable (IO), 404/410 (MODEL_NOT_FOUND),
 * other statuses (IO). A HEAD request (`method`) asks for the headers only.
 */
export async function request(url: string, signal: AbortSignal | undefined, range?: number, method: "GET" | "HEAD" = "GET"): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { method, signal, headers: range === undefined ? {} : { Range: `bytes=${range}-` } });
  } catch (cause) {
    throw aborted(url, signal, cause) ?? new InferenceError("IO", `${url}: cannot download (${(cause as Error).message ?? String(cause)})`, { cause, details: { url } });
  }
  if (response.status === 404 || response.status === 410) {
    throw new InferenceError("MODEL_NOT_FOUND", `${url}: no model there (HTTP ${response.status})`, { details: { url, status: response.status } });
  }
  if (!response.ok) {
    throw new InferenceError("IO", `${url}: the server answered HTTP ${response.status} ${response.statusText}`.trim(), {
      details: { url, status: response.status },
    });
  }
  if (method === "GET" && !response.body) throw new InferenceError("IO", `${url}: the response has no body`, { details: { url } });
  return response;
}

/** The body's length when the bytes on the wire are the file's (no compression), else undefined. */
function declaredSize(response: Response): number | undefined {
  const encoding = response.headers.get("content-encoding");
  if (encoding && encoding !== "identity") return undefined;
  const length = Number(response.headers.get("content-length") ?? NaN);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

/** The size of the file at url (a HEAD request), undefined when the server does not say it. */
export async function remoteSize(url: string, signal: AbortSignal | undefined): Promise<number | undefined> {
  return declaredSize(await request(url, signal, undefined, "HEAD"));
}

export async function openDownload(url: string, options: { onProgress?: ProgressListener; signal?: AbortSignal }): Promise<Download> {
  const { onProgress, signal } = options;
  const first = await request(url, signal);
  let reader: Reader = first.body!.getReader() as Reader;
  /** Chunks read ahead of readInto (the peeked head, or the whole body when its size is not declared). */
  const pending: Uint8Array[] = [];
  let pendingBytes = 0;
  let size = declaredSize(first);
  if (size === undefined) {
    // No declared length: the size is only known at the end (so a cut cannot be told from the end
    // either), and the body is read ahead whole.
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      pending.push(read.value!);
      pendingBytes += read.value!.byteLength;
      onProgress?.({ phase: "download", loadedBytes: pendingBytes, totalBytes: undefined });
    }
    size = pendingBytes;
  }
  const total = size;
  const fail = (done: number, cause?: unknown): InferenceError =>
    aborted(url, signal, cause) ??
    new InferenceError("IO", `${url}: the download stopped after ${done} of ${total} bytes and could not be resumed`, {
      cause,
      details: { url, loadedBytes: done, totalBytes: total },
    });

  /** Bytes nextChunk has handed out. */
  let received = pendingBytes;
  let resumes = 0;
  /** The next chunk of the body, resuming with a Range request where the connection broke; undefined at the end. */
  const nextChunk = async (): Promise<Uint8Array | undefined> => {
    for (;;) {
      let cause: unknown;
      try {
        const { done, value } = await reader.read();
        if (!done) {
          received += value!.byteLength;
          return value;
        }
      } catch (error) {
        cause = error;
      }
      if (received >= total) return undefined;
      // Cut (an error, or an end before the announced length): ask for the rest.
      if (signal?.aborted || ++resumes > MAX_RESUMES) throw fail(received, cause);
      await reader.cancel().catch(() => undefined);
      const rest = await request(url, signal, received).catch((error: unknown) => {
        throw fail(received, error);
      });
      const range = /^bytes (\d+)-/.exec(rest.headers.get("content-range") ?? "");
      if (rest.status !== 206 || Number(range?.[1]) !== received) {
        await rest.body!.cancel().catch(() => undefined);
        throw fail(received, new Error(`the server answered the Range request with HTTP ${rest.status}, not the missing bytes`));
      }
      reader = rest.body!.getReader() as Reader;
    }
  };

  return {
    size: total,
    cancel: () => void reader.cancel().catch(() => undefined),
    async peek(count) {
      while (pendingBytes < Math.min(count, total)) {
        const chunk = await nextChunk();
        if (!chunk) break;
        pending.push(chunk);
        pendingBytes += chunk.byteLength;
      }
      const head = new Uint8Array(Math.min(count, pendingBytes));
      let at = 0;
      for (const chunk of pending) {
        if (at >= head.byteLength) break;
        const part = chunk.subarray(0, head.byteLength - at);
        head.set(part, at);
        at += part.byteLength;
      }
      return head;
    },
    async readInto(target) {
      let done = 0;
      const put = (chunk: Uint8Array): void => {
        if (done + chunk.byteLength > total) throw new InferenceError("IO", `${url}: the server sent more than the ${total} bytes it announced`, { details: { url } });
        target.set(chunk, done);
        done += chunk.byteLength;
        onProgress?.({ phase: "download", loadedBytes: done, totalBytes: total });
      };
      for (const chunk of pending.splice(0)) put(chunk);
      while (done < total) {
        const chunk = await nextChunk();
        if (!chunk) throw fail(done);
        put(chunk);
      }
    },
  };
}
