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

interface TrieNode {
  children: Map<number, TrieNode>;
  rule?: AddedTokenRule;
}

export type Fragment = { text: string } | { id: number };

const isWhitespace = (ch: string) => /\s/u.test(ch);

export class SpecialTokenMatcher {
  private readonly root: TrieNode = { children: new Map() };
  readonly size: number;

  constructor(rules: readonly AddedTokenRule[]) {
    let size = 0;
    for (const rule of rules) {
      if (rule.text.length === 0) continue;
      let node = this.root;
      for (let i = 0; i < rule.text.length; i++) {
        const code = rule.text.charCodeAt(i);
        let child = node.children.get(code);
        if (!child) {
          child = { children: new Map() };
          node.children.set(code, child);
        }
        node = child;
      }
      node.rule ??= rule;
      size++;
    }
    this.size = size;
  }

  /** The longest rule matching `text` at `start`, if any. */
  private longestAt(text: string, start: number): AddedTokenRule | undefined {
    let node: TrieNode | undefined = this.root;
    let found: AddedTokenRule | undefined;
    for (let i = start; i < text.length && node; i++) {
      node = node.children.get(text.charCodeAt(i));
      if (node?.rule) found = node.rule;
    }
    return found;
  }

  /** Cuts `text` into plain-text fragments and matched token ids, in order; empty fragments are dropped. */
  split(text: string): Fragment[] {
    const out: Fragment[] = [];
    if (this.size === 0) return text.length > 0 ? [{ text }] : [];
    let pending = "";
    let i = 0;
    while (i < text.length) {
      const rule = this.root.children.has(text.charCodeAt(i)) ? this.longestAt(text, i) : undefined;
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
