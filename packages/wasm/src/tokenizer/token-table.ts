import { PackedStrings, sameBytes } from "@infer/formats";
/**
 * A vocabulary's texts and the lookup from text to id, kept as UTF-8 bytes
 * in typed arrays: the packed texts and an open-addressing hash table of ids
 * keyed by those bytes. A `Map<string, number>` over 150,000 tokens holds a
 * string object and a map entry per token on the JavaScript heap; this holds a
 * small fraction of that, outside the heap.
 * Lookups compare bytes, as llama.cpp's token-to-id map does.
 */

const encoder = new TextEncoder();
const RECENT_LOOKUPS = 16384;

export class TokenTable {
  readonly texts: PackedStrings;
  /** Hash slot -> token id, or -1 when empty (see tableCapacity). */
  private readonly slots: Int32Array;
  private readonly mask: number;
  /** Reused to encode looked-up text; grown as needed. */
  private scratch = new Uint8Array(256);
  /**
   * Recent lookups by text (-1: not a token). Merging looks the same short
   * pieces up again and again, and a Map hit skips encoding and hashing the
   * bytes; bounded, so it stays small beside the vocabulary.
   */
  private readonly recent = new Map<string, number>();

  constructor(texts: PackedStrings | readonly string[]) {
    this.texts = texts instanceof PackedStrings ? texts : PackedStrings.fromStrings(texts);
    this.slots = new Int32Array(tableCapacity(this.texts.length)).fill(-1);
    this.mask = this.slots.length - 1;
    const { bytes, starts } = this.texts;
    for (let id = 0; id < this.texts.length; id++) {
      const start = starts[id]!;
      const end = starts[id + 1]!;
      const slot = this.find(bytes, start, end);
      // Of two tokens with one spelling the later id wins, as in a Map filled in id order.
      this.slots[slot] = id;
    }
  }

  get size(): number {
    return this.texts.length;
  }

  /** Token `id`'s text. */
  text(id: number): string {
    return this.texts.get(id);
  }

  /** The id of the token spelled `text`, or undefined. */
  id(text: string): number | undefined {
    let id = this.recent.get(text);
    if (id === undefined) {
      if (this.scratch.length < text.length * 3) this.scratch = new Uint8Array(text.length * 3);
      const { written } = encoder.encodeInto(text, this.scratch);
      id = this.idOfBytes(this.scratch, 0, written) ?? -1;
      if (this.recent.size >= RECENT_LOOKUPS) this.recent.clear();
      this.recent.set(text, id);
    }
    return id < 0 ? undefined : id;
  }

  /** The id of the token spelled by `bytes[start, end)`, or undefined. */
  idOfBytes(bytes: Uint8Array, start: number, end: number): number | undefined {
    const id = this.slots[this.find(bytes, start, end)]!;
    return id < 0 ? undefined : id;
  }

  /** The slot holding the token spelled by `bytes[start, end)`, or the empty slot where it would go. */
  private find(bytes: Uint8Array, start: number, end: number): number {
    // FNV-1a over the bytes.
    let hash = 0x811c9dc5;
    for (let i = start; i < end; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
    const stored = this.texts.bytes;
    const starts = this.texts.starts;
    const length = end - start;
    for (let slot = hash & this.mask; ; slot = (slot + 1) & this.mask) {
      const id = this.slots[slot]!;
      if (id < 0) return slot;
      const at = starts[id]!;
      if (starts[id + 1]! - at === length && sameBytes(stored, at, bytes, start, length)) return slot;
    }
  }
}

/**
 * Slots for an open-addressing table of `entries`: a power of two at least
 * 1.5 times the entries, so at most two thirds full, where linear probing
 * takes about two probes to find a key and a few to miss one, at half the
 * memory of keeping it under half full.
 */
export function tableCapacity(entries: number): number {
  let capacity = 16;
  while (capacity < entries * 1.5) capacity *= 2;
  return capacity;
}
