/**
 * What the engine needs from the JavaScript runtime it runs in, and nothing more: the one seam
 * between the portable code (formats, tokenizer, engine, kernels' host side) and Node or a browser.
 * The code imports the implementation as "#platform", which package.json's "imports" resolves by
 * condition: "node" (node.ts), "browser" and "default" (browser.ts; also Deno and Bun through their
 * own conditions or Node compatibility).
 */
import type { ModelFormat } from "@infer/core";
import type { GgufFile, GgufHeader, SafetensorsModel } from "@infer/formats";

/** Where a file is read to, given its size (a view of the kernels' memory, say). */
export type BufferAllocator = (byteLength: number) => Uint8Array;

/** A kernel worker as the pool sees it, whatever starts it (worker_threads or a Web Worker). */
export interface KernelWorker {
  /** Resolves once the worker has set up and said so; rejects when it fails to start. */
  readonly ready: Promise<void>;
  /** Called once when the worker fails or exits other than by terminate(). */
  onFailure(listener: (error: Error) => void): void;
  terminate(): Promise<void>;
}

/** The worker's own side: its setup message, and the way to tell the pool it is ready. */
export interface WorkerEndpoint {
  setup: unknown;
  ready(): void;
}

/** Model files on a file system (Node). A runtime without one throws UNSUPPORTED from each. */
export interface PathFiles {
  /** undefined when nothing is at path. */
  stat(path: string): Promise<{ isDirectory: boolean; size: number } | undefined>;
  /** A model's text file (config.json, adapter_config.json): a regular file, MODEL_FORMAT naming it when a pipe or device. */
  readText(path: string): Promise<string>;
  /** Text read to its end from a regular file or a pipe: a dataset may come through one (`--data <(...)`). */
  readTextStream(path: string): Promise<string>;
  /** Writes a text file, making its folder first (the testing helpers' random models). */
  writeText(path: string, text: string): Promise<void>;
  list(folder: string): Promise<string[]>;
  /** A whole file's bytes; MODEL_NOT_FOUND naming it (as a `kind` file) when it is not there. */
  readBytes(path: string, kind: string): Promise<Uint8Array>;
  /**
   * Writes a file so that a reader never sees half of it (a temporary name beside it, then a
   * rename), making its folder first; IO naming the path when it cannot.
   */
  writeAtomically(path: string, data: Uint8Array | string): Promise<void>;
  /** What is at path by its content ("unknown" where nothing readable is). */
  detectFormat(path: string): Promise<ModelFormat>;
  readGguf(path: string, memory: { allocate?: BufferAllocator; release?: (view: Uint8Array) => void }): Promise<GgufFile>;
  readGgufHeader(path: string): Promise<GgufHeader>;
  readSafetensorsModel(folder: string, allocate?: BufferAllocator): Promise<SafetensorsModel>;
  join(...parts: string[]): string;
  dirname(path: string): string;
  basename(path: string): string;
}

export interface Platform {
  /** A short name for messages ("node", "browser"). */
  readonly name: string;
  /** The bytes at a URL next to the code (the kernels' .wasm builds). */
  readBinary(url: URL): Promise<Uint8Array>;
  /** Starts the module at url as a kernel worker, handing it `setup` (structured-cloned: shared memory stays shared). */
  startWorker(url: URL, setup: unknown): KernelWorker;
  /** Inside a kernel worker: its setup, and how to report ready. */
  workerEndpoint(): Promise<WorkerEndpoint>;
  /** Threads worth computing on by default. */
  coreCount(): number;
  /**
   * Whether shared memory can be handed to workers here (a browser page needs cross-origin
   * isolation for it); the reason when it cannot, for a one-line note.
   */
  threadsUnavailable(): string | undefined;
  /** Whether this thread may block in Atomics.wait (a browser's main thread may not: it spins instead). */
  readonly canBlock: boolean;
  /** Resolves in a new macrotask, after pending timers and I/O (abort signals, sockets, UI events) had their turn. */
  nextTask(): Promise<void>;
  /** Bytes of memory the machine has, for default cache sizes. */
  memoryBytes(): number;
  /** An environment variable's value (undefined where the runtime has none). */
  env(name: string): string | undefined;
  readonly files: PathFiles;
}
