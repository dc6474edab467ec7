/**
 * The few WebAssembly JS API pieces the kernels use, typed here: the package
 * compiles against lib ES2023 and @types/node 20, neither of which declares the
 * WebAssembly namespace (lib "dom" does, but would bring every browser global
 * into the whole package).
 */

export interface WasmMemory {
  /** A SharedArrayBuffer: the memory is created shared. After grow() this is a new, longer object. */
  readonly buffer: SharedArrayBuffer;
  /** Grows by `pages` of 64 KiB; throws RangeError past the maximum. */
  grow(pages: number): number;
}

/** A compiled module; it can be posted to worker threads. */
export interface WasmModule {
  readonly __wasmModule?: never;
}

export interface WasmInstance {
  readonly exports: Record<string, unknown>;
}

interface WasmApi {
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
  Instance: new (module: WasmModule, imports: Record<string, Record<string, unknown>>) => WasmInstance;
  compile(bytes: Uint8Array): Promise<WasmModule>;
  validate(bytes: Uint8Array): boolean;
}

export const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
