import type { EventEmitter } from "node:events";

/** Where a command reads and writes; tests pass their own streams. */
export interface CliIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Emits "SIGINT" (and "SIGTERM"); default `process`. */
  signals: EventEmitter;
}

export function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, signals: process };
}

/** Reads a whole stream as UTF-8 (the prompt when none is given on the command line). */
export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}

/** Resolves when `write` has flushed, so large outputs are not cut off at exit. */
export function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(text, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * An AbortController fired by Ctrl-C while `run` works; the listener is
 * removed afterwards so a later Ctrl-C behaves normally again.
 */
export async function withInterrupt<T>(io: CliIO, run: (signal: AbortSignal) => Promise<T>): Promise<{ value: T; interrupted: boolean }> {
  const controller = new AbortController();
  const onSignal = () => controller.abort(new Error("interrupted (Ctrl-C)"));
  io.signals.on("SIGINT", onSignal);
  try {
    const value = await run(controller.signal);
    return { value, interrupted: controller.signal.aborted };
  } finally {
    io.signals.off("SIGINT", onSignal);
  }
}

/** Resolves at the first SIGINT or SIGTERM (Ctrl-C): how a server command waits to shut down. */
export function untilStopped(io: CliIO): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      io.signals.off("SIGINT", stop);
      io.signals.off("SIGTERM", stop);
      resolve();
    };
    io.signals.on("SIGINT", stop);
    io.signals.on("SIGTERM", stop);
  });
}
