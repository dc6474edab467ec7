/** The KV cache: keys and values of every layer for a fixed number of sequence slots. */
import { InferenceError } from "@infer/core";
import { kvBytes, readKVRow, writeKVRow } from "../kernels/kv-codec.js";
import { Q8_BLOCK, type KVBuffer } from "../kernels/types.js";
import type { ScratchMemory } from "./scratch.js";

/**
 * How the cache stores keys and values: float32; IEEE half (f16 bits in a
 * Uint16Array, half the bytes); or Q8_0 blocks (a Uint8Array, 34 bytes per 32
 * elements; needs numKVHeads * headDim to be a multiple of 32).
 */
export type KVCacheType = "f32" | "f16" | "q8_0";

/** Bytes one cached key or value element takes in each encoding (Q8_0: its share of a block). */
export const KV_ELEMENT_BYTES: Record<KVCacheType, number> = { f32: 4, f16: 2, q8_0: 34 / 32 };

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
   * Float32Array for kvType "f32", Uint16Array of f16 bits for "f16", Uint8Array of blocks for "q8_0".
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
    if (!Object.hasOwn(KV_ELEMENT_BYTES, kvType)) {
      throw new InferenceError("INVALID_OPTION", `KV cache type must be f32, f16 or q8_0, got ${String(kvType)}`);
    }
    if (kvType === "q8_0" && this.kvDim % Q8_BLOCK !== 0) {
      throw new InferenceError("INVALID_OPTION", `a q8_0 KV cache needs numKVHeads * headDim to be a multiple of 32, got ${this.kvDim}`);
    }
    const layerBytes = kvBytes(kvType, perLayer);
    const layerBuffer = (): KVBuffer => {
      const bytes = memory.allocate ? memory.allocate(layerBytes, 64) : new Uint8Array(layerBytes);
      if (kvType === "f32") return new Float32Array(bytes.buffer, bytes.byteOffset, perLayer);
      if (kvType === "f16") return new Uint16Array(bytes.buffer, bytes.byteOffset, perLayer);
      return bytes;
    };
    this.keys = Array.from({ length: config.numLayers }, layerBuffer);
    this.values = Array.from({ length: config.numLayers }, layerBuffer);
    this.lengths = new Int32Array(numSeqs);
  }

  /** Bytes held by keys and values. */
  get bytes(): number {
    return this.keys.length * 2 * kvBytes(this.kvType, this.numSeqs * this.contextLength * this.kvDim);
  }

  /**
   * Writes the key and value rows (kvDim floats each) of one position, or of consecutive
   * positions of one sequence, from element `at` of `layer`, encoded as the cache's kvType.
   */
  store(layer: number, at: number, key: Float32Array, value: Float32Array): void {
    writeKVRow(this.keys[layer]!, at, key);
    writeKVRow(this.values[layer]!, at, value);
  }

  /** A copy of `count` key elements of `layer` from element `from`, decoded to float32. */
  readKeys(layer: number, from: number, count: number): Float32Array {
    return readKVRow(this.keys[layer]!, from, count);
  }

  /** Bytes one position's key row (or value row) takes, in the cache's encoding. */
  get rowBytes(): number {
    return kvBytes(this.kvType, this.kvDim);
  }

  /**
   * A copy of the encoded key and value rows of positions 0 .. count - 1 of
   * `seq`, laid out [layer][keys, values][count rows], as `writeRows` takes them.
   */
  copyRows(seq: number, count: number): Uint8Array {
    const part = count * this.rowBytes;
    const out = new Uint8Array(this.keys.length * 2 * part);
    let at = 0;
    for (const buffer of this.layerBuffers()) {
      out.set(this.slotBytes(buffer, seq).subarray(0, part), at);
      at += part;
    }
    return out;
  }

  /**
   * Writes the first `count` positions of rows laid out as `copyRows` gives
   * them (`rowsHeld` positions each part) into `seq`, which then holds them.
   */
  writeRows(seq: number, rows: Uint8Array, rowsHeld: number, count: number): void {
    if (count > rowsHeld || count > this.contextLength || rows.length !== this.keys.length * 2 * rowsHeld * this.rowBytes) {
      throw new InferenceError("INVALID_OPTION", `KV rows of ${rowsHeld} positions cannot fill ${count} positions of the cache`);
    }
    const part = rowsHeld * this.rowBytes;
    let at = 0;
    for (const buffer of this.layerBuffers()) {
      this.slotBytes(buffer, seq).set(rows.subarray(at, at + count * this.rowBytes));
      at += part;
    }
    this.setLength(seq, count);
  }

  /** keys[0], values[0], keys[1], ...: the order `copyRows` lays them out in. */
  private layerBuffers(): KVBuffer[] {
    return this.keys.flatMap((keys, layer) => [keys, this.values[layer]!]);
  }

  /** The bytes of `seq`'s positions in one layer's key or value buffer. */
  private slotBytes(buffer: KVBuffer, seq: number): Uint8Array {
    const start = kvBytes(this.kvType, this.offset(this.checkSeq(seq), 0));
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    return bytes.subarray(start, start + kvBytes(this.kvType, this.contextLength * this.kvDim));
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
