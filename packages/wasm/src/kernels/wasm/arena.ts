/**
 * The one shared WasmMemory the kernels and all their worker threads
 * compute on, and a small allocator over it. Weights copied in once stay put,
 * so no call copies them again; scratch buffers are reused across calls.
 *
 * Memory only grows (WebAssembly cannot shrink it). Freed ranges go to a free
 * list, merged with their neighbours, and are reused first-fit.
 */
import { InferenceError } from "@infer/core";
import { wasmApi, type WasmMemory } from "./webassembly.js";

const PAGE_BYTES = 65536;
/** 65536 pages: the most a 32-bit WebAssembly address space holds, and the module's declared maximum. */
export const MAX_MEMORY_PAGES = 65536;

interface Range {
  address: number;
  byteLength: number;
}

export class SharedArena {
  readonly memory: WasmMemory;
  /** Every SharedArrayBuffer object this memory has been seen through (one per size after growing). */
  private readonly buffers = new WeakSet<ArrayBufferLike>();
  private bytes!: Uint8Array;
  /** End of the allocated prefix: everything at or above it is free. */
  private top: number;
  /** Freed ranges below `top`, sorted by address, never adjacent. */
  private readonly freeRanges: Range[] = [];
  /** Size of each live allocation, by address. */
  private readonly live = new Map<number, number>();
  private ints: Int32Array = new Int32Array(0);
  /** Bytes at or above this were never handed out: still the zeros memory.grow gave them. */
  private neverUsedFrom: number;

  /** `base`: first address the module leaves to the host (its heapBase). */
  constructor(base: number, maxPages = MAX_MEMORY_PAGES) {
    const initialPages = Math.max(1, Math.ceil((base + PAGE_BYTES) / PAGE_BYTES));
    this.memory = new wasmApi.Memory({ initial: initialPages, maximum: maxPages, shared: true });
    this.top = alignUp(base, 64);
    this.neverUsedFrom = this.top;
    this.refresh();
  }

  /** Memory's current size in bytes. */
  get byteLength(): number {
    return this.memory.buffer.byteLength;
  }

  /** Reserves `byteLength` zero-filled bytes at an `align`-aligned address and returns the address. */
  allocate(byteLength: number, align = 64): number {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new InferenceError("INTERNAL", `kernel memory: cannot allocate ${byteLength} bytes`);
    }
    if (!Number.isSafeInteger(align) || align < 1 || (align & (align - 1)) !== 0 || align > PAGE_BYTES) {
      throw new InferenceError("INTERNAL", `kernel memory: alignment ${align} is not a power of two up to 65536`);
    }
    const size = Math.max(byteLength, 1);
    const address = this.takeFree(size, align) ?? this.takeTop(size, align);
    this.live.set(address, size);
    // Only bytes used before need zeroing: filling fresh memory would touch (commit) every page
    // of a model file before it is read in, for nothing (a second pass over gigabytes of weights).
    if (address < this.neverUsedFrom) this.bytes.fill(0, address, Math.min(address + size, this.neverUsedFrom));
    this.neverUsedFrom = Math.max(this.neverUsedFrom, address + size);
    return address;
  }

  /** Returns an allocation made by `allocate` to the free list. */
  release(address: number): void {
    const size = this.live.get(address);
    if (size === undefined) throw new InferenceError("INTERNAL", `kernel memory: ${address} is not an allocation`);
    this.live.delete(address);
    this.insertFree({ address, byteLength: size });
  }

  /** A byte view of [address, address + byteLength); valid for the memory's lifetime, also after it grows. */
  view(address: number, byteLength: number): Uint8Array {
    // Recorded for addressOf: V8 hands out a new SharedArrayBuffer object for this memory whenever
    // any shared memory in the process grows (another model's kernels, say), not only this one.
    const buffer = this.memory.buffer;
    this.buffers.add(buffer);
    return new Uint8Array(buffer, address, byteLength);
  }

  /** Bytes of the memory as of its latest growth, for copying in and out. */
  get heap(): Uint8Array {
    return this.bytes;
  }

  /** The memory as int32s (index = address / 4), as of its latest growth. */
  get heapInts(): Int32Array {
    if (this.ints.buffer !== this.bytes.buffer) this.ints = new Int32Array(this.bytes.buffer);
    return this.ints;
  }

  /** The address of a view into this memory, or undefined for a view of any other buffer. */
  addressOf(view: ArrayBufferView): number | undefined {
    return this.buffers.has(view.buffer) ? view.byteOffset : undefined;
  }

  private takeFree(size: number, align: number): number | undefined {
    for (let i = 0; i < this.freeRanges.length; i++) {
      const range = this.freeRanges[i]!;
      const address = alignUp(range.address, align);
      const end = range.address + range.byteLength;
      if (address + size > end) continue;
      this.freeRanges.splice(i, 1);
      // Keep the unused head (alignment padding) and tail on the free list.
      if (address > range.address) this.insertFree({ address: range.address, byteLength: address - range.address });
      if (end > address + size) this.insertFree({ address: address + size, byteLength: end - address - size });
      return address;
    }
    return undefined;
  }

  private takeTop(size: number, align: number): number {
    const address = alignUp(this.top, align);
    const end = address + size;
    if (end > this.bytes.byteLength) this.grow(end);
    if (address > this.top) this.insertFree({ address: this.top, byteLength: address - this.top });
    this.top = end;
    return address;
  }

  private grow(needed: number): void {
    const pages = Math.ceil((needed - this.memory.buffer.byteLength) / PAGE_BYTES);
    try {
      this.memory.grow(pages);
    } catch (cause) {
      // UNSUPPORTED, not INTERNAL: a model larger than 32-bit WebAssembly memory is beyond this backend, not a bug.
      throw new InferenceError(
        "UNSUPPORTED",
        `kernel memory: cannot grow to ${needed} bytes (WebAssembly memory tops out at 4 GiB, and the host may refuse less)`,
        { cause, details: { needed } },
      );
    }
    this.refresh();
  }

  private refresh(): void {
    this.buffers.add(this.memory.buffer);
    this.bytes = new Uint8Array(this.memory.buffer);
  }

  private insertFree(range: Range): void {
    if (range.byteLength === 0) return;
    // A range ending at `top` just lowers `top`.
    if (range.address + range.byteLength === this.top) {
      this.top = range.address;
      const last = this.freeRanges[this.freeRanges.length - 1];
      if (last && last.address + last.byteLength === this.top) {
        this.freeRanges.pop();
        this.top = last.address;
      }
      return;
    }
    let i = 0;
    while (i < this.freeRanges.length && this.freeRanges[i]!.address < range.address) i++;
    const before = this.freeRanges[i - 1];
    const after = this.freeRanges[i];
    if (before && before.address + before.byteLength === range.address) {
      before.byteLength += range.byteLength;
      if (after && before.address + before.byteLength === after.address) {
        before.byteLength += after.byteLength;
        this.freeRanges.splice(i, 1);
      }
    } else if (after && range.address + range.byteLength === after.address) {
      after.address = range.address;
      after.byteLength += range.byteLength;
    } else {
      this.freeRanges.splice(i, 0, range);
    }
  }
}

export function alignUp(value: number, align: number): number {
  return Math.ceil(value / align) * align;
}

/** A scratch buffer in the arena that is replaced by a larger one when a call needs more. */
export class Scratch {
  address = 0;
  private capacity = -1;
  constructor(private readonly arena: SharedArena) {}

  /** The address of at least `byteLength` bytes, valid until the next larger `ensure`. */
  ensure(byteLength: number): number {
    if (byteLength > this.capacity) {
      if (this.capacity >= 0) this.arena.release(this.address);
      // Rounded up to a power of two, so slowly growing shapes reallocate a few times only.
      this.capacity = 2 ** Math.ceil(Math.log2(Math.max(byteLength, 4096)));
      this.address = this.arena.allocate(this.capacity);
    }
    return this.address;
  }
}
