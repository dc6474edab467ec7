/** What the host halves of the kernels (matmul-host.ts, attention-host.ts) share. */
import { InferenceError } from "@infer/core";
import { Scratch, type SharedArena } from "./arena.js";
import type { WorkerPool } from "./pool.js";
import type { KernelExports } from "./protocol.js";

export class KernelContext {
  disposed = false;
  /** Arena copies of weights that live elsewhere, by the view they came from. */
  private readonly residentCopies = new WeakMap<ArrayBufferView, { address: number; byteLength: number }>();
  /** Releases an arena copy once the view it came from is collected. */
  readonly releaseWhenCollected: FinalizationRegistry<number>;

  constructor(
    readonly arena: SharedArena,
    readonly exports: KernelExports,
    readonly pool: WorkerPool,
    /** A call uses at most one thread per this many bytes read; 0: every thread. */
    readonly minBytesPerThread: number,
  ) {
    this.releaseWhenCollected = new FinalizationRegistry<number>((address) => {
      if (!this.disposed) arena.release(address);
    });
  }

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

  /**
   * The address of the first `byteLength` bytes of a weight (immutable, read
   * by many calls) in the arena: in place when it lives there, else a copy made
   * on first use and kept while the view is reachable (copied again if a later
   * call reads more of the same view).
   */
  residentAddress(data: ArrayBufferView, byteLength: number): number {
    const arena = this.arena;
    const inPlace = arena.addressOf(data);
    if (inPlace !== undefined) return inPlace;
    const copy = this.residentCopies.get(data);
    if (copy && copy.byteLength >= byteLength) return copy.address;
    if (copy) {
      this.releaseWhenCollected.unregister(copy);
      arena.release(copy.address);
    }
    const fresh = { address: arena.allocate(byteLength), byteLength };
    arena.heap.set(new Uint8Array(data.buffer, data.byteOffset, byteLength), fresh.address);
    this.residentCopies.set(data, fresh);
    this.releaseWhenCollected.register(data, fresh.address, fresh);
    return fresh.address;
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
