// Deterministic randomness for the fuzzer: every mutant is a function of (campaign seed, target, case index),
// so a case can be regenerated from its numbers alone.

import { seededRandom } from "@infer/core/testing";

/** The shared seeded generator, with the picks a mutator needs. */
export function rng(seed) {
  const next = seededRandom(seed);
  const int = (n) => Math.floor(next() * n);
  return {
    next,
    int,
    chance: (p) => next() < p,
    pick: (list) => list[int(list.length)],
    /** Picks by weight: entries are [weight, value]. */
    weighted(entries) {
      let total = 0;
      for (const [w] of entries) total += w;
      let at = next() * total;
      for (const [w, value] of entries) if ((at -= w) < 0) return value;
      return entries[entries.length - 1][1];
    },
  };
}

/** FNV-1a of a string: mixes a target's name into its case seeds. */
export function hashString(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export function caseSeed(campaignSeed, target, index) {
  return (Math.imul(hashString(target) ^ campaignSeed, 0x9e3779b1) + Math.imul(index, 0x85ebca6b)) >>> 0;
}
