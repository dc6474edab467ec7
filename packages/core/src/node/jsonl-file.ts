import { createWriteStream } from "node:fs";
import { InferenceError } from "../errors.js";
import type { ProbeKind, ProbeSink } from "../probes.js";
import { jsonlRecorder } from "../probe-sinks/jsonl.js";

export interface JsonlFileRecorder {
  readonly sink: ProbeSink;
  /** Flushes and closes the file; rejects when writing failed. */
  close(): Promise<void>;
}

/**
 * Records probe events to `path` as JSON Lines (appending). Writes are
 * buffered by a stream, so a token costs no system call; `close()` flushes.
 */
export function jsonlFileRecorder(path: string, options: { kinds?: ProbeKind[] } = {}): JsonlFileRecorder {
  if (typeof path !== "string" || path === "") {
    throw new InferenceError("INVALID_OPTION", "jsonlFileRecorder path must be a non-empty string", { details: { field: "path" } });
  }
  const stream = createWriteStream(path, { flags: "a" });
  let failure: unknown;
  // Without a listener a write error would be an uncaught exception; it is reported by close().
  stream.on("error", (error) => (failure ??= error));
  return {
    sink: jsonlRecorder((line) => {
      if (failure === undefined) stream.write(line);
    }, options),
    close: () =>
      new Promise<void>((resolve, reject) => {
        const done = () =>
          failure === undefined
            ? resolve()
            : reject(new InferenceError("INVALID_OPTION", `could not write probe events to ${path}`, { cause: failure, details: { path } }));
        if (stream.destroyed) done();
        else {
          stream.end((error?: Error | null) => {
            failure ??= error ?? undefined;
            done();
          });
        }
      }),
  };
}
