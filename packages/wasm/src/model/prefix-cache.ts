import { commonPrefixLength, pickSlot } from "@infer/core";
import type { KVCache } from "../engine/cache.js";

/** A conversation's prefix copied out of a slot: its ids and their encoded KV rows (`KVCache.copyRows`). */
export interface KVRows {
  ids: number[];
  rows: Uint8Array;
}

interface SavedPrefix extends KVRows {
  usedAt: number;
}

/**
 * Prefix reuse over a KV cache: each slot remembers the ids its keys and
 * values were computed for, so a prompt that starts with them (the next turn
 * of a chat, a shared system prompt) evaluates only the rest. A slot about to
 * be overwritten by another conversation has its prefix copied out first, and
 * those copies are kept, least recently used dropped first, within
 * `budgetBytes`; a later prompt may take its prefix back from one. With a
 * budget of 0 calls leave nothing to reuse (a restored snapshot still is).
 */
export class PrefixCache {
  /** held[slot]: the ids whose rows the slot holds, in order. */
  private readonly held: number[][];
  /** When each slot was last claimed, so the least recently used one is overwritten first. */
  private readonly usedAt: number[];
  /** Slots holding a restored snapshot: reused even with reuse off. */
  private readonly restored: boolean[];
  private saved: SavedPrefix[] = [];
  private clock = 0;

  constructor(
    private readonly cache: KVCache,
    private readonly budgetBytes: number,
  ) {
    this.held = Array.from({ length: cache.numSeqs }, () => []);
    this.usedAt = new Array<number>(cache.numSeqs).fill(0);
    this.restored = new Array<boolean>(cache.numSeqs).fill(false);
  }

  /** Bytes held by the saved copies (the slots themselves are the KV cache's). */
  get savedBytes(): number {
    return this.saved.reduce((sum, entry) => sum + entry.rows.length, 0);
  }

  /** The slot of `free` that `prompt` should take: see `pickSlot`. */
  pickSlot(free: readonly number[], prompt: readonly number[]): number {
    return pickSlot(
      free.map((slot) => ({ slot, held: this.held[slot]!.length, shared: commonPrefixLength(this.held[slot]!, prompt), usedAt: this.usedAt[slot]! })),
    ).slot;
  }

  /**
   * Readies `slot` for `prompt`: returns how many of its leading ids already
   * have their rows in the slot (never the whole prompt: its last position's
   * logits must be computed), taken from a saved copy when that reuses more.
   */
  claim(slot: number, prompt: readonly number[]): number {
    const limit = Math.max(0, prompt.length - 1);
    const useHeld = this.budgetBytes > 0 || this.restored[slot]!;
    let reused = useHeld ? Math.min(commonPrefixLength(this.held[slot]!, prompt), limit) : 0;
    const copy = this.bestSaved(prompt);
    const fromCopy = copy ? Math.min(commonPrefixLength(copy.ids, prompt), limit) : 0;
    if (copy && fromCopy > reused) {
      this.save(slot);
      this.cache.writeRows(slot, copy.rows, copy.ids.length, fromCopy);
      copy.usedAt = ++this.clock;
      reused = fromCopy;
    } else if (reused < this.held[slot]!.length / 2) {
      // Another conversation takes the slot. A prompt that keeps most of the slot's ids is the same one going on
      // (its last ids re-tokenized or edited): a copy would store a near-duplicate.
      this.save(slot);
    }
    // Until the call ends, the slot is known to hold only the reused ids.
    this.held[slot] = prompt.slice(0, reused);
    this.restored[slot] = false;
    this.usedAt[slot] = ++this.clock;
    return reused;
  }

  /** A call is over: `slot` holds the rows of `ids`. */
  release(slot: number, ids: number[]): void {
    this.held[slot] = ids;
  }

  /** `slot`'s rows are being overwritten by something that is not a conversation (classify, inspection). */
  forget(slot: number): void {
    this.held[slot] = [];
    this.restored[slot] = false;
  }

  /** The model's weights changed (a LoRA adapter): no cached rows are valid any more. */
  forgetAll(): void {
    for (let slot = 0; slot < this.held.length; slot++) this.forget(slot);
    this.saved = [];
  }

  /** The ids `slot` holds and a copy of their rows. */
  snapshot(slot: number): KVRows {
    const ids = [...this.held[slot]!];
    return { ids, rows: this.cache.copyRows(slot, ids.length) };
  }

  /** Loads a conversation into the least recently used slot, whose own prefix is saved first. */
  restore(state: KVRows): number {
    const slot = this.pickSlot(
      this.held.map((_, i) => i),
      [],
    );
    this.save(slot);
    this.cache.writeRows(slot, state.rows, state.ids.length, state.ids.length);
    this.held[slot] = [...state.ids];
    this.restored[slot] = true;
    this.usedAt[slot] = ++this.clock;
    return slot;
  }

  /** The saved copy sharing the longest prefix with `prompt`, if any shares one. */
  private bestSaved(prompt: readonly number[]): SavedPrefix | undefined {
    let best: SavedPrefix | undefined;
    let bestLength = 0;
    for (const entry of this.saved) {
      const length = commonPrefixLength(entry.ids, prompt);
      if (length > bestLength) [best, bestLength] = [entry, length];
    }
    return best;
  }

  /** Copies `slot`'s prefix out before it is overwritten, when the budget holds it and no copy covers it already. */
  private save(slot: number): void {
    const ids = this.held[slot]!;
    const bytes = this.cache.keys.length * 2 * ids.length * this.cache.rowBytes;
    if (ids.length === 0 || bytes > this.budgetBytes) return;
    if (this.saved.some((entry) => commonPrefixLength(entry.ids, ids) === ids.length)) return;
    // Copies that are prefixes of this one are covered by it.
    this.saved = this.saved.filter((entry) => commonPrefixLength(entry.ids, ids) < entry.ids.length);
    this.saved.sort((a, b) => a.usedAt - b.usedAt);
    let total = this.savedBytes;
    while (total + bytes > this.budgetBytes) total -= this.saved.shift()!.rows.length;
    this.saved.push({ ids: [...ids], rows: this.cache.copyRows(slot, ids.length), usedAt: ++this.clock });
  }
}
