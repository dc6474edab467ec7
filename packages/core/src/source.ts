/**
 * What `loadModel` reads a model from. A file or folder path is what every backend takes; an
 * http(s) URL, a Blob (a File dropped on a page) or bytes in memory are for backends that say so
 * (`Backend.loadSource`: wasm), which is what a browser has instead of a file system.
 */
import { InferenceError } from "./errors.js";
import { isHttpUrl } from "./urls.js";

/** The part of a Blob (or File) a backend reads: its size and slices of it. */
export interface ModelBlob {
  readonly size: number;
  /** A File's name, for messages. */
  readonly name?: string;
  slice(start?: number, end?: number): ModelBlob;
  arrayBuffer(): Promise<ArrayBuffer>;
}

export type ModelSource = string | URL | ModelBlob | ArrayBuffer | ArrayBufferView;


/** True for a file or folder path (a string that is not an http(s) URL). */
export function isPathSource(source: ModelSource): source is string {
  return typeof source === "string" && !isHttpUrl(source);
}

function isBlob(source: unknown): source is ModelBlob {
  return (
    typeof source === "object" &&
    source !== null &&
    typeof (source as ModelBlob).size === "number" &&
    typeof (source as ModelBlob).slice === "function" &&
    typeof (source as ModelBlob).arrayBuffer === "function"
  );
}

/** The source's kind: "path", "url", "blob" or "bytes"; INVALID_OPTION for anything else. */
export function sourceKind(source: unknown): "path" | "url" | "blob" | "bytes" {
  if (typeof source === "string" && source.length > 0) return isHttpUrl(source) ? "url" : "path";
  if (source instanceof URL) {
    if (source.protocol === "http:" || source.protocol === "https:") return "url";
    if (source.protocol === "file:") return "path";
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return "bytes";
  if (isBlob(source)) return "blob";
  throw new InferenceError(
    "INVALID_OPTION",
    "a model source must be a non-empty path, an http(s) URL, a Blob/File, an ArrayBuffer or a typed array",
    { details: { source: typeof source } },
  );
}

/** The file path of a "path" source (a string, or a file: URL). */
export function sourcePath(source: string | URL): string {
  return source instanceof URL ? decodeURIComponent(source.pathname) : source;
}

/** A source for messages: the path or URL, or what the bytes are. */
export function describeSource(source: ModelSource): string {
  const kind = sourceKind(source);
  if (kind === "path" || kind === "url") return String(source);
  if (kind === "blob") {
    const blob = source as ModelBlob;
    return blob.name ? `the file ${blob.name}` : `a Blob of ${blob.size} bytes`;
  }
  return `${(source as ArrayBuffer | ArrayBufferView).byteLength} bytes in memory`;
}
