/**
 * Per-forward scratch memory: every intermediate buffer of one forward call
 * (activations, projections, attention outputs) is carved from one block that
 * lives as long as the Transformer, so a decode step allocates no big buffers.
 * With kernels that offer `allocate`, the block lives in their memory, so the
 * matmuls read their inputs and write their outputs in place (no staging copy).
 *
 * A call to `begin` starts a forward: everything handed out before is free
 * again. A forward that needs more than the block holds gets ordinary arrays
 * for the excess, and the next `begin` replaces the block with one large
 * enough, so the block settles at the largest batch's needs after one call.
 */

/** Floats per alignment unit: 16 floats = 64 bytes, a cache line (and what SIMD loads like). */
const ALIGN_FLOATS = 16;

export interface ScratchMemory {
  allocate?(byteLength: number, align?: number): Uint8Array;
  release?(view: Uint8Array): void;
}

export class ForwardScratch {
  private block: Float32Array = new Float32Array(0);
  private blockBytes: Uint8Array | undefined;
  /** Floats handed out since `begin`. */
  private used = 0;
  /** Floats the current forward has asked for in all, block or not. */
  private needed = 0;

  constructor(private readonly memory: ScratchMemory = {}) {}

  /** Starts a forward: frees everything handed out, and grows the block to the last forward's need. */
  begin(): void {
    if (this.needed > this.block.length) this.replaceBlock(Math.ceil(this.needed * 1.25));
    this.used = 0;
    this.needed = 0;
  }

  /**
   * `count` floats valid until the next `begin`. Not zeroed: the caller writes
   * every element before reading it.
   */
  floats(count: number): Float32Array {
    const start = Math.ceil(this.used / ALIGN_FLOATS) * ALIGN_FLOATS;
    const end = start + count;
    this.needed = Math.max(this.needed, end);
    this.used = end;
    if (end <= this.block.length) return this.block.subarray(start, end);
    return new Float32Array(count);
  }

  /** Bytes the block holds. */
  get bytes(): number {
    return this.block.byteLength;
  }

  /** Hands the block back to the kernels' memory. */
  dispose(): void {
    if (this.blockBytes) this.memory.release?.(this.blockBytes);
    this.blockBytes = undefined;
    this.block = new Float32Array(0);
  }

  private replaceBlock(floats: number): void {
    this.dispose();
    if (this.memory.allocate) {
      this.blockBytes = this.memory.allocate(floats * 4, 64);
      this.block = new Float32Array(this.blockBytes.buffer, this.blockBytes.byteOffset, floats);
    } else {
      this.block = new Float32Array(floats);
    }
  }
}
