/**
 * Per-forward scratch memory: the intermediate buffers of a forward call
 * (activations, projections, attention outputs) are carved from blocks that
 * live as long as the Transformer, so a decode step allocates no big buffers.
 * With kernels that offer `allocate`, the blocks live in their memory, so the
 * matmuls read their inputs and write their outputs in place (no staging copy).
 *
 * Lifetimes, so that memory stays one layer's worth rather than growing with
 * the layer count:
 *  - `forwardFloats`: valid until the next `begin`, that is, for one forward
 *    call (the residual stream x).
 *  - `floats`: valid until the next `freeLayerBuffers`, which the residual
 *    add that ends each attention and MLP sublayer calls (layers.ts): only the
 *    residual stream crosses from one sublayer to the next, so the buffers
 *    made to compute what was just added to x are dead. Taken after the last
 *    residual add, they last until the next `begin`.
 *  - Freed memory is handed out again at once: the next sublayer's buffers,
 *    and every later layer's, are the same bytes (often the same Float32Array
 *    objects, cached by start and length). A view kept too long does not
 *    fail; it reads, and its writes corrupt, whatever buffer now lives there.
 *  - `begin` hands back the overflow allocations and may replace a block with
 *    a larger one, the old one released to the kernels' memory for any later
 *    `allocate` (a KV cache, another model on the same kernels). So no buffer
 *    from here outlives the forward that took it; what a forward returns (the
 *    logits) lives elsewhere.
 *  - Growing the WebAssembly memory invalidates nothing: it is shared memory,
 *    whose buffer is never detached, so views made before a grow still address
 *    the same bytes (kernels/wasm/arena.ts).
 *  - `dispose` releases both blocks: no view may be used after it.
 *
 * The buffers are [tokens, width] arrays, so a block's need grows with the
 * batch: `begin` sizes each block for the coming batch from the most floats a
 * token has needed so far, before the forward runs. Without that, a first
 * prompt chunk after decoding would fill separate allocations and the next
 * `begin` a block as large again: twice the pages touched, all of them kept
 * resident. A forward that still needs more than its block holds gets the
 * excess from separate allocations (in the kernels' memory too, so it runs in
 * place), handed back when the region empties; the next `begin` grows the block.
 */

/** Floats per alignment unit: 16 floats = 64 bytes, a cache line (and what SIMD loads like). */
const ALIGN_FLOATS = 16;
const VIEW_CACHE_LIMIT = 512;

export interface ScratchMemory {
  allocate?(byteLength: number, align?: number): Uint8Array;
  release?(view: Uint8Array): void;
}

/** Bytes the regions of one ForwardScratch hold now, and the most they held since `resetPeak`. */
class Tally {
  held = 0;
  peak = 0;

  add(bytes: number): void {
    this.held += bytes;
    this.peak = Math.max(this.peak, this.held);
  }

  remove(bytes: number): void {
    this.held -= bytes;
  }
}

/** One bump-allocated block with a high-water mark. */
class Region {
  private block: Float32Array = new Float32Array(0);
  private blockBytes: Uint8Array | undefined;
  /**
   * Allocations beyond the block since the last settle, and whether each is
   * handed out now: the layers of one forward ask for the same sizes in turn,
   * so after the first layer they reuse these rather than allocate (and zero) more.
   */
  private readonly overflow: { bytes: Uint8Array; taken: boolean }[] = [];
  private used = 0;
  /** Most floats in use at once since the last `settle`. */
  private needed = 0;
  /**
   * Views of the block handed out before, by start and then length: a decode
   * step asks for the same buffers every token, and a new typed-array object
   * for each was most of the JavaScript garbage a token made. Cleared when it
   * holds VIEW_CACHE_LIMIT views (prompt chunks of many sizes) or the block goes.
   */
  private readonly views = new Map<number, Float32Array[]>();
  private viewCount = 0;
  /** Tokens in the batch since the last `settle`, and the most floats a token has needed in any batch. */
  private tokens = 0;
  private perToken = 0;

  constructor(
    private readonly memory: ScratchMemory,
    private readonly tally: Tally,
  ) {}

  take(count: number): Float32Array {
    const start = Math.ceil(this.used / ALIGN_FLOATS) * ALIGN_FLOATS;
    const end = start + count;
    this.used = end;
    this.needed = Math.max(this.needed, end);
    if (end <= this.block.length) return this.view(start, count);
    if (!this.memory.allocate) return new Float32Array(count);
    let spare = this.overflow.find((chunk) => !chunk.taken && chunk.bytes.byteLength >= count * 4);
    if (!spare) {
      spare = { bytes: this.memory.allocate(count * 4, 64), taken: false };
      this.overflow.push(spare);
      this.tally.add(spare.bytes.byteLength);
    }
    spare.taken = true;
    return new Float32Array(spare.bytes.buffer, spare.bytes.byteOffset, count);
  }

  private view(start: number, count: number): Float32Array {
    let views = this.views.get(start);
    if (views === undefined) {
      if (this.viewCount >= VIEW_CACHE_LIMIT) this.forgetViews();
      views = [];
      this.views.set(start, views);
    }
    for (let i = 0; i < views.length; i++) if (views[i]!.length === count) return views[i]!;
    const view = this.block.subarray(start, start + count);
    views.push(view);
    this.viewCount++;
    return view;
  }

  private forgetViews(): void {
    this.views.clear();
    this.viewCount = 0;
  }

  empty(): void {
    this.used = 0;
    for (const chunk of this.overflow) chunk.taken = false;
  }

  /** Empties the region and grows its block to what a batch of `tokens` is expected to need. */
  settle(tokens: number): void {
    this.releaseOverflow();
    this.used = 0;
    if (this.tokens > 0) this.perToken = Math.max(this.perToken, this.needed / this.tokens);
    const expected = Math.max(this.needed, Math.ceil(this.perToken * tokens));
    if (expected > this.block.length) this.replace(Math.ceil(expected * 1.25));
    this.needed = 0;
    this.tokens = tokens;
  }

  dispose(): void {
    this.releaseOverflow();
    this.tally.remove(this.block.byteLength);
    if (this.blockBytes) this.memory.release?.(this.blockBytes);
    this.blockBytes = undefined;
    this.block = new Float32Array(0);
  }

  private releaseOverflow(): void {
    for (const { bytes } of this.overflow) {
      this.memory.release?.(bytes);
      this.tally.remove(bytes.byteLength);
    }
    this.overflow.length = 0;
  }

  private replace(floats: number): void {
    this.dispose();
    this.forgetViews();
    if (this.memory.allocate) {
      this.blockBytes = this.memory.allocate(floats * 4, 64);
      this.block = new Float32Array(this.blockBytes.buffer, this.blockBytes.byteOffset, floats);
    } else {
      this.block = new Float32Array(floats);
    }
    this.tally.add(this.block.byteLength);
  }
}

export class ForwardScratch {
  private readonly whole: Region;
  private readonly layer: Region;
  private readonly tally = new Tally();

  constructor(memory: ScratchMemory = {}) {
    this.whole = new Region(memory, this.tally);
    this.layer = new Region(memory, this.tally);
  }

  /** Starts a forward of `tokens` tokens: frees everything handed out, and grows the blocks to what it is expected to need. */
  begin(tokens: number): void {
    this.whole.settle(tokens);
    this.layer.settle(tokens);
  }

  /** `count` floats valid until the next `begin`. Not zeroed: the caller writes every element before reading it. */
  forwardFloats(count: number): Float32Array {
    return this.whole.take(count);
  }

  /** `count` floats valid until the next `freeLayerBuffers`. Not zeroed, as above. */
  floats(count: number): Float32Array {
    return this.layer.take(count);
  }

  /** Every buffer `floats` handed out before is free again. */
  freeLayerBuffers(): void {
    this.layer.empty();
  }

  /** Bytes the blocks and their overflow allocations hold. */
  get bytes(): number {
    return this.tally.held;
  }

  /** The most `bytes` has been since the last `resetPeak` (growing a block counts the new one only: the old is freed first). */
  get peakBytes(): number {
    return this.tally.peak;
  }

  resetPeak(): void {
    this.tally.peak = this.tally.held;
  }

  /** Hands the blocks back to the kernels' memory. */
  dispose(): void {
    this.whole.dispose();
    this.layer.dispose();
  }
}
