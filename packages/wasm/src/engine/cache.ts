/** The KV cache: keys and values of every layer for a fixed number of sequence slots. */
import { InferenceError } from "@infer/core";
import { f16Table65536, f32ToF16 } from "../formats/half.js";
import type { KVBuffer } from "../kernels/types.js";
import type { ScratchMemory } from "./scratch.js";

/** How the cache stores keys and values: float32, or IEEE half (f16 bits in a Uint16Array, half the bytes). */
export type KVCacheType = "f32" | "f16";

/** Bytes one cached key or value element takes in each encoding. */
export const KV_ELEMENT_BYTES: Record<KVCacheType, number> = { f32: 4, f16: 2 };

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
  /**
   * keys[layer], values[layer]: [numSeqs, contextLength, numKVHeads * headDim],
   * Float32Array for kvType "f32", Uint16Array of f16 bits for "f16".
   */
  readonly keys: KVBuffer[];
  readonly values: KVBuffer[];
  readonly kvDim: number;
  private readonly lengths: Int32Array; // [numSeqs]

  /**
   * `memory`: where keys and values live; with kernels that offer `allocate`
   * (the WebAssembly kernels), their attention reads the cache in place.
   */
  constructor(
    config: KVCacheShape,
    numSeqs: number,
    contextLength: number,
    private readonly memory: ScratchMemory = {},
    readonly kvType: KVCacheType = "f32",
  ) {
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
    if (KV_ELEMENT_BYTES[kvType] === undefined) {
      throw new InferenceError("INVALID_OPTION", `KV cache type must be f32 or f16, got ${String(kvType)}`);
    }
    const half = kvType === "f16";
    const layerBuffer = (): KVBuffer => {
      if (!memory.allocate) return half ? new Uint16Array(perLayer) : new Float32Array(perLayer);
      const bytes = memory.allocate(perLayer * KV_ELEMENT_BYTES[kvType], 64);
      return half ? new Uint16Array(bytes.buffer, bytes.byteOffset, perLayer) : new Float32Array(bytes.buffer, bytes.byteOffset, perLayer);
    };
    this.keys = Array.from({ length: config.numLayers }, layerBuffer);
    this.values = Array.from({ length: config.numLayers }, layerBuffer);
    this.lengths = new Int32Array(numSeqs);
  }

  /** Bytes held by keys and values. */
  get bytes(): number {
    return this.keys.length * 2 * this.numSeqs * this.contextLength * this.kvDim * KV_ELEMENT_BYTES[this.kvType];
  }

  /** Writes one position's key and value rows (kvDim floats each) at `at` of `layer`, rounding to f16 for an f16 cache. */
  store(layer: number, at: number, key: Float32Array, value: Float32Array): void {
    writeRow(this.keys[layer]!, at, key);
    writeRow(this.values[layer]!, at, value);
  }

  /** `count` key elements of `layer` from `from`, as float32 (a copy for an f16 cache, a view for f32). */
  readKeys(layer: number, from: number, count: number): Float32Array {
    return readRow(this.keys[layer]!, from, count);
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

function writeRow(buffer: KVBuffer, at: number, row: Float32Array): void {
  if (buffer instanceof Float32Array) {
    buffer.set(row, at);
    return;
  }
  for (let i = 0; i < row.length; i++) buffer[at + i] = f32ToF16(row[i]!);
}

function readRow(buffer: KVBuffer, from: number, count: number): Float32Array {
  if (buffer instanceof Float32Array) return buffer.subarray(from, from + count);
  const table = f16Table65536();
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = table[buffer[from + i]!]!;
  return out;
}
