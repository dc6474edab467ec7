/**
 * The merge loop shared by every BPE flavour here. Symbols start as single
 * characters; the adjacent pair with the best (lowest) priority is merged,
 * leftmost first on ties, until no adjacent pair has a priority. This is the
 * loop of llama.cpp's SPM and BPE sessions: SentencePiece ranks a pair by the
 * score of the merged piece, BPE by the merge's line in the merges list.
 */
import { tableCapacity } from "./token-table.js";

/** Priority of merging `left` + `right`; lower merges first, undefined never merges. */
export type PairPriority = (left: string, right: string) => number | undefined;

interface Candidate {
  priority: number;
  left: number;
  /** The merged text when queued: a stale candidate (a side changed since) is skipped. */
  text: string;
}

/** Binary min-heap ordered by (priority, left). */
class CandidateHeap {
  private readonly items: Candidate[] = [];

  get size(): number {
    return this.items.length;
  }

  push(item: Candidate): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): Candidate {
    const items = this.items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < items.length && before(items[l]!, items[best]!)) best = l;
        if (r < items.length && before(items[r]!, items[best]!)) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best]!, items[i]!];
        i = best;
      }
    }
    return top;
  }
}

function before(a: Candidate, b: Candidate): boolean {
  return a.priority < b.priority || (a.priority === b.priority && a.left < b.left);
}

/** Merges `symbols` (usually the characters of one word) and returns the final pieces in order. */
export function mergeSymbols(symbols: readonly string[], priority: PairPriority): string[] {
  const n = symbols.length;
  if (n < 2) return symbols.slice();
  const text = symbols.slice();
  // Doubly linked list over symbol slots; a merged-away slot gets text "".
  const prev = Array.from({ length: n }, (_, i) => i - 1);
  const next = Array.from({ length: n }, (_, i) => (i + 1 < n ? i + 1 : -1));
  const heap = new CandidateHeap();

  const consider = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const p = priority(text[left]!, text[right]!);
    if (p !== undefined) heap.push({ priority: p, left, text: text[left]! + text[right]! });
  };

  for (let i = 0; i + 1 < n; i++) consider(i, i + 1);

  while (heap.size > 0) {
    const { left, text: merged } = heap.pop();
    const right = next[left]!;
    if (right < 0 || text[left] === "" || text[left]! + text[right]! !== merged) continue;
    text[left] = merged;
    text[right] = "";
    next[left] = next[right]!;
    if (next[right]! >= 0) prev[next[right]!] = left;
    consider(prev[left]!, left);
    consider(left, next[left]!);
  }

  const out: string[] = [];
  for (let i = 0; i >= 0; i = next[i]!) out.push(text[i]!);
  return out;
}

/**
 * Merge ranks keyed by (left id, right id): an open-addressing hash table in
 * typed arrays, several times smaller and faster to build than a Map over
 * joined strings (Gemma's vocabulary has half a million merges).
 */
export class PairRankTable {
  private readonly lefts: Int32Array;
  private readonly rights: Int32Array;
  private readonly ranks: Int32Array;
  private readonly mask: number;

  constructor(capacityHint: number) {
    const capacity = tableCapacity(capacityHint);
    this.lefts = new Int32Array(capacity).fill(-1);
    this.rights = new Int32Array(capacity);
    this.ranks = new Int32Array(capacity);
    this.mask = capacity - 1;
  }

  private slot(left: number, right: number): number {
    return (Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 1, 0x85ebca77)) & this.mask;
  }

  /** Records `rank` for the pair unless it already has one (the first listing wins). */
  add(left: number, right: number, rank: number): void {
    for (let i = this.slot(left, right); ; i = (i + 1) & this.mask) {
      if (this.lefts[i] === -1) {
        this.lefts[i] = left;
        this.rights[i] = right;
        this.ranks[i] = rank;
        return;
      }
      if (this.lefts[i] === left && this.rights[i] === right) return;
    }
  }

  get(left: number, right: number): number | undefined {
    for (let i = this.slot(left, right); ; i = (i + 1) & this.mask) {
      const stored = this.lefts[i]!;
      if (stored === -1) return undefined;
      if (stored === left && this.rights[i] === right) return this.ranks[i];
    }
  }
}
