/**
 * A list of strings kept as one buffer of their UTF-8 bytes and the offsets
 * between them, decoded only when an item is read.
 *
 * Why not `string[]`: a GGUF vocabulary holds 150,000 tokens and as many
 * merges. As JavaScript strings each carries an object header besides its
 * characters, and building them all at once makes V8 promote every one and
 * grow its young generation (peak RSS, issue #5); as bytes they take a small
 * fraction of that, outside the heap,
 * and a vocabulary can look tokens up by their bytes (as llama.cpp does).
 */

// ignoreBOM keeps a leading U+FEFF: an item decodes to exactly its bytes.
import { decodeUtf8 } from "./utf8.js";

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const encoder = new TextEncoder();

/** Whether a[aStart, aStart + length) and b[bStart, bStart + length) hold the same bytes. */
export function sameBytes(a: Uint8Array, aStart: number, b: Uint8Array, bStart: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (a[aStart + i] !== b[bStart + i]) return false;
  return true;
}

export class PackedStrings implements Iterable<string> {
  /**
   * `bytes` holds the items back to back; item i is bytes[starts[i], starts[i + 1]).
   * `starts` has one entry more than there are items.
   */
  constructor(
    readonly bytes: Uint8Array,
    readonly starts: Uint32Array,
  ) {
    if (starts.length === 0 || starts[0] !== 0 || starts[starts.length - 1] !== bytes.length) {
      throw new RangeError("PackedStrings: starts must run from 0 to bytes.length");
    }
  }

  static fromStrings(items: readonly string[]): PackedStrings {
    const encoded = items.map((item) => encoder.encode(item));
    const starts = new Uint32Array(items.length + 1);
    for (let i = 0; i < encoded.length; i++) starts[i + 1] = starts[i]! + encoded[i]!.length;
    const bytes = new Uint8Array(starts[items.length]!);
    encoded.forEach((item, i) => bytes.set(item, starts[i]));
    return new PackedStrings(bytes, starts);
  }

  get length(): number {
    return this.starts.length - 1;
  }

  /** Item `index` decoded (invalid UTF-8 becomes U+FFFD). */
  get(index: number): string {
    return decodeUtf8(decoder, this.bytesOf(index));
  }

  /** Item `index` as a view of its bytes (not a copy). */
  bytesOf(index: number): Uint8Array {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) {
      throw new RangeError(`PackedStrings: index ${index} outside 0..${this.length - 1}`);
    }
    return this.bytes.subarray(this.starts[index]!, this.starts[index + 1]!);
  }

  byteLengthOf(index: number): number {
    return this.starts[index + 1]! - this.starts[index]!;
  }

  /** Every index whose item is `text`, in order (compared as bytes). */
  indicesOf(text: string): number[] {
    const wanted = encoder.encode(text);
    const found: number[] = [];
    for (let i = 0; i < this.length; i++) {
      const start = this.starts[i]!;
      if (this.starts[i + 1]! - start === wanted.length && sameBytes(this.bytes, start, wanted, 0, wanted.length)) found.push(i);
    }
    return found;
  }

  *[Symbol.iterator](): Iterator<string> {
    for (let i = 0; i < this.length; i++) yield this.get(i);
  }

  toArray(): string[] {
    return Array.from(this);
  }
}
