/** What the host halves of the kernels (matmul-host.ts, attention-host.ts) share. */
import { InferenceError } from "@infer/core";
import { Scratch, type SharedArena } from "./arena.js";
import type { WorkerPool } from "./pool.js";
import type { KernelExports } from "./protocol.js";

export class KernelContext {
  disposed = false;

  constructor(
    readonly arena: SharedArena,
    readonly exports: KernelExports,
    readonly pool: WorkerPool,
    /** A call uses at most one thread per this many bytes read; 0: every thread. */
    readonly minBytesPerThread: number,
  ) {}

  scratch(): Scratch {
    return new Scratch(this.arena);
  }

  /** Threads worth waking for a call that reads `bytes`. */
  threadsFor(bytes: number): number {
    if (this.minBytesPerThread === 0) return this.pool.threads;
    return Math.min(this.pool.threads, Math.max(1, Math.floor(bytes / this.minBytesPerThread)));
  }

  checkOpen(): void {
    if (this.disposed) throw new InferenceError("CLOSED", "the WebAssembly kernels are disposed");
  }

  /** The address of `values` in the arena: in place when they live there, else copied into `stage`. */
  floatsIn(values: Float32Array, count: number, stage: Scratch): number {
    const inPlace = this.arena.addressOf(values);
    if (inPlace !== undefined) return inPlace;
    const address = stage.ensure(count * 4);
    new Float32Array(this.arena.heap.buffer, address, count).set(values.subarray(0, count));
    return address;
  }

  /** Copies `count` floats at `address` into `out` unless `out` is that very memory. */
  copyOut(out: Float32Array, address: number, count: number): void {
    if (this.arena.addressOf(out) === address) return;
    out.set(new Float32Array(this.arena.heap.buffer, address, count));
  }
}
