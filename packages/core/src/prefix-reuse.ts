/**
 * Prefix reuse, the part both local backends share: which KV-cache slot a
 * prompt takes, so that a chat's next turn lands where its earlier turns are.
 */

/** How many leading ids `a` and `b` share. */
export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const limit = Math.min(a.length, b.length);
  let n = 0;
  while (n < limit && a[n] === b[n]) n++;
  return n;
}

/** What choosing a slot for a prompt looks at. */
export interface SlotCandidate {
  /** Tokens the slot holds. */
  held: number;
  /** Of those, how many begin the prompt. */
  shared: number;
  /** When the slot was last used (larger is later). */
  usedAt: number;
}

/**
 * The slot a prompt takes: of the slots whose conversation it continues (it
 * keeps at least half of what they hold), the one sharing the most; failing
 * that, the least recently used, so a new conversation does not overwrite a
 * recent one for the sake of a few shared tokens (a BOS, a short system prompt).
 */
export function pickSlot<T extends SlotCandidate>(candidates: readonly T[]): T {
  let best: T | undefined;
  for (const c of candidates) {
    if (c.shared > 0 && c.shared * 2 >= c.held && (best === undefined || c.shared > best.shared)) best = c;
  }
  if (best) return best;
  return candidates.reduce((oldest, c) => (c.usedAt < oldest.usedAt ? c : oldest));
}
