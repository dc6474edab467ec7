/**
 * The real llama-server for tests: built from the llama.cpp source inside
 * node-llama-cpp by scripts/llama-server/build.mjs (once per machine, cached
 * outside the clone), started on 127.0.0.1 with stories260K.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

/** The repository's root, seen from packages/remote/dist/test. */
const ROOT = new URL("../../../../", import.meta.url);
export const STORIES_GGUF = fileURLToPath(new URL("../shared/models/stories260K/stories260K.gguf", ROOT));
export const skipWithoutStories = existsSync(STORIES_GGUF) ? undefined : `needs ${STORIES_GGUF} (the shared test models)`;

/** The llama-server binary, built now when this machine has none for this llama.cpp version (slow, once). */
export async function llamaServerBinary(): Promise<string> {
  const script = new URL("scripts/llama-server/build.mjs", ROOT).href;
  const { ensureLlamaServer } = (await import(script)) as { ensureLlamaServer: () => string };
  return ensureLlamaServer();
}

/** What GET /slots tells of a slot (the last task's counts stay after it ends). */
export interface Slot {
  id: number;
  is_processing: boolean;
  next_token?: { n_decoded: number; n_remain: number }[];
}

export interface RunningServer {
  url: string;
  port: number;
  process: ChildProcess;
  /** Kills it (SIGKILL: a crash, not a shutdown) and waits for the exit. */
  kill(): Promise<void>;
  /** GET /slots: each slot's state. */
  slots(): Promise<Slot[]>;
  /** A counter of GET /metrics (started with --metrics), by the end of its name. */
  metric(name: string): Promise<number | undefined>;
}

/** A port nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts llama-server with stories260K (CPU, one thread per slot is plenty
 * for a 260K-parameter model); resolves once /health answers 200 unless
 * `waitReady` is false.
 */
export async function startLlamaServer(options: { contextLength?: number; slots?: number; extra?: string[]; waitReady?: boolean; port?: number } = {}): Promise<RunningServer> {
  const binary = await llamaServerBinary();
  const port = options.port ?? (await freePort());
  const args = ["-m", STORIES_GGUF, "--host", "127.0.0.1", "--port", String(port), "-c", String(options.contextLength ?? 1024)];
  args.push("-np", String(options.slots ?? 2), "-t", "1", "--slots", "--no-warmup", ...(options.extra ?? []));
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const running: RunningServer = {
    url,
    port,
    process: child,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async slots() {
      const response = await fetch(`${url}/slots`);
      return (await response.json()) as Slot[];
    },
    async metric(name) {
      const text = await (await fetch(`${url}/metrics`)).text();
      const value = new RegExp(`^\\S*${name}\\s+(\\S+)$`, "m").exec(text)?.[1];
      return value === undefined ? undefined : Number(value);
    },
  };
  if (options.waitReady === false) return running;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}: ${log}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return running;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await running.kill();
  throw new Error(`llama-server did not become ready within 60 s: ${log}`);
}
