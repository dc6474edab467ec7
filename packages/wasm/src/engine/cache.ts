/** The KV cache: keys and values of every layer for a fixed number of sequence slots. */
import { InferenceError } from "@infer/core";
import type { ScratchMemory } from "./scratch.js";

/** The config fields the cache's shape depends on. */
export interface KVCacheShape {
  numLayers: number;
  numKVHeads: number;
  headDim: number;
}

export class KVCache {
  readonly numSeqs: number;
  /** Positions each slot holds. */
  readonly contextLength: number;
  /** keys[layer], values[layer]: [numSeqs, contextLength, numKVHeads * headDim]. */
  readonly keys: Float32Array[];
  readonly values: Float32Array[];
  readonly kvDim: number;
  private readonly lengths: Int32Array; // [numSeqs]

  /**
   * `memory`: where keys and values live; with kernels that offer `allocate`
   * (the WebAssembly kernels), their attention reads the cache in place.
   */
  constructor(config: KVCacheShape, numSeqs: number, contextLength: number, private readonly memory: ScratchMemory = {}) {
    for (const [name, value] of [
      ["numSeqs", numSeqs],
      ["contextLength", contextLength],
    ] as const) {
      if (!Number.isInteger(value) || value <= 0) {
        throw new InferenceError("INVALID_OPTION", `KV cache ${name} must be a positive integer, got ${value}`);
      }
    }
    this.numSeqs = numSeqs;
    this.contextLength = contextLength;
    this.kvDim = config.numKVHeads * config.headDim;
    const perLayer = numSeqs * contextLength * this.kvDim;
    if (perLayer > 2 ** 30) {
      throw new InferenceError(
        "INVALID_OPTION",
        `a KV cache of ${numSeqs} sequences x ${contextLength} positions is too large for one layer's buffer`,
      );
    }
    const layerBuffer = (): Float32Array => {
      if (!memory.allocate) return new Float32Array(perLayer);
      const bytes = memory.allocate(perLayer * 4, 64);
      return new Float32Array(bytes.buffer, bytes.byteOffset, perLayer);
    };
    this.keys = Array.from({ length: config.numLayers }, layerBuffer);
    this.values = Array.from({ length: config.numLayers }, layerBuffer);
    this.lengths = new Int32Array(numSeqs);
  }

  /** Bytes held by keys and values. */
  get bytes(): number {
    return this.keys.length * 2 * this.numSeqs * this.contextLength * this.kvDim * 4;
  }

  /** Hands keys and values back to the kernels' memory; the cache is unusable afterwards. */
  dispose(): void {
    if (!this.memory.release) return;
    for (const buffer of [...this.keys, ...this.values]) {
      this.memory.release(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength));
    }
    this.keys.length = 0;
    this.values.length = 0;
  }

  /** Positions of `seq` currently cached. */
  length(seq: number): number {
    return this.lengths[this.checkSeq(seq)]!;
  }

  clear(seq: number): void {
    this.lengths[this.checkSeq(seq)] = 0;
  }

  /** Forgets positions >= length of `seq` (e.g. to re-run a changed suffix). */
  truncate(seq: number, length: number): void {
    const current = this.lengths[this.checkSeq(seq)]!;
    if (!Number.isInteger(length) || length < 0) {
      throw new InferenceError("INVALID_OPTION", `KV cache truncate length must be a non-negative integer, got ${length}`);
    }
    this.lengths[seq] = Math.min(current, length);
  }

  /** Records that `seq` now holds positions 0 .. length - 1 (the forward pass wrote them). */
  setLength(seq: number, length: number): void {
    this.lengths[this.checkSeq(seq)] = length;
  }

  /** Offset of (seq, position) in a layer's key / value buffer. */
  offset(seq: number, position: number): number {
    return (seq * this.contextLength + position) * this.kvDim;
  }

  private checkSeq(seq: number): number {
    if (!Number.isInteger(seq) || seq < 0 || seq >= this.numSeqs) {
      throw new InferenceError("INVALID_OPTION", `sequence ${seq} is not a KV cache slot (0 .. ${this.numSeqs - 1})`);
    }
    return seq;
  }
}
