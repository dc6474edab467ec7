/**
 * Finds special and added tokens written out in input text ("<|im_start|>")
 * so they encode as the token itself rather than as pieces of its spelling.
 * At each position the longest token that starts there wins (Hugging Face's
 * added-vocabulary rule).
 */

export interface AddedTokenRule {
  id: number;
  text: string;
  /** Swallow whitespace to the left / right of the match (tokenizer.json `lstrip` / `rstrip`). */
  lstrip?: boolean;
  rstrip?: boolean;
}

export type Fragment = { text: string } | { id: number };

const isWhitespace = (ch: string) => /\s/u.test(ch);

export class SpecialTokenMatcher {
  /** Each token's text to its rule (the first of duplicates wins). */
  private readonly byText = new Map<string, AddedTokenRule>();
  /**
   * For each code unit that starts a token, the distinct lengths of those tokens, longest first: the
   * longest match is the first length that hits, and most positions of a text are ruled out by one lookup.
   */
  private readonly lengthsByFirstUnit = new Map<number, number[]>();
  readonly size: number;

  // A map keyed by whole texts rather than a character trie: a trie costs a node per character,
  // and a tokenizer.json with a megabyte-long added token (a corrupt or hostile file) then spent
  // seconds in the garbage collector before the first token.
  constructor(rules: readonly AddedTokenRule[]) {
    for (const rule of rules) {
      if (rule.text.length === 0 || this.byText.has(rule.text)) continue;
      this.byText.set(rule.text, rule);
      const first = rule.text.charCodeAt(0);
      const lengths = this.lengthsByFirstUnit.get(first) ?? [];
      if (!lengths.includes(rule.text.length)) lengths.push(rule.text.length);
      this.lengthsByFirstUnit.set(first, lengths);
    }
    for (const lengths of this.lengthsByFirstUnit.values()) lengths.sort((a, b) => b - a);
    this.size = this.byText.size;
  }

  /** The longest rule matching `text` at `start`, if any. */
  private longestAt(text: string, start: number): AddedTokenRule | undefined {
    for (const length of this.lengthsByFirstUnit.get(text.charCodeAt(start)) ?? []) {
      if (start + length > text.length) continue;
      const rule = this.byText.get(text.slice(start, start + length));
      if (rule) return rule;
    }
    return undefined;
  }

  /** Cuts `text` into plain-text fragments and matched token ids, in order; empty fragments are dropped. */
  split(text: string): Fragment[] {
    const out: Fragment[] = [];
    if (this.size === 0) return text.length > 0 ? [{ text }] : [];
    let pending = "";
    let i = 0;
    while (i < text.length) {
      const rule = this.longestAt(text, i);
      if (!rule) {
        pending += text[i];
        i++;
        continue;
      }
      if (rule.lstrip) pending = pending.replace(/\s+$/u, "");
      if (pending.length > 0) out.push({ text: pending });
      pending = "";
      out.push({ id: rule.id });
      i += rule.text.length;
      if (rule.rstrip) while (i < text.length && isWhitespace(text[i]!)) i++;
    }
    if (pending.length > 0) out.push({ text: pending });
    return out;
  }
}
