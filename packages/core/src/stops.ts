import type { FinishReason, Token } from "./types.js";

/**
 * Decides, token by token, what a sequence emits and when it ends: `maxTokens`
 * and stop strings. Stop strings are matched on text, so a stop string that
 * spans several tokens is found too. Text that might be the start of a stop
 * string is held back (whole tokens at a time) until it is known not to be;
 * the stop string itself is never emitted, the text before it always is.
 */
export class SequenceStopper {
  private readonly stopStrings: string[];
  private readonly maxTokens: number;
  private pending: Token[] = [];
  private pendingText = "";
  private count = 0;
  private finished: FinishReason | undefined;

  constructor(options: { maxTokens?: number; stopStrings?: string[] }) {
    this.maxTokens = options.maxTokens ?? Infinity;
    this.stopStrings = options.stopStrings ?? [];
  }

  /** Set once the sequence has ended on a stop string or `maxTokens`. */
  get done(): FinishReason | undefined {
    return this.finished;
  }

  /** Feeds one generated token; returns the tokens that may be emitted now. */
  push(token: Token): Token[] {
    if (this.finished) return [];
    this.count++;
    if (this.stopStrings.length === 0) {
      if (this.count >= this.maxTokens) this.finished = "length";
      return [token];
    }
    this.pending.push(token);
    this.pendingText += token.text;

    const stopAt = this.firstStop();
    if (stopAt >= 0) {
      this.finished = "stop";
      return this.take(stopAt, true);
    }
    if (this.count >= this.maxTokens) {
      this.finished = "length";
      return this.flush();
    }
    return this.take(this.pendingText.length - this.heldSuffixLength(), false);
  }

  /** The sequence ended for another reason (EOS, context end): release everything held. */
  flush(): Token[] {
    const out = this.pending;
    this.pending = [];
    this.pendingText = "";
    return out;
  }

  private firstStop(): number {
    let best = -1;
    for (const stop of this.stopStrings) {
      const at = this.pendingText.indexOf(stop);
      if (at >= 0 && (best < 0 || at < best)) best = at;
    }
    return best;
  }

  /** Length of the longest suffix of the pending text that begins some stop string. */
  private heldSuffixLength(): number {
    const text = this.pendingText;
    let longest = 0;
    for (const stop of this.stopStrings) {
      for (let len = Math.min(stop.length - 1, text.length); len > longest; len--) {
        if (text.endsWith(stop.slice(0, len))) {
          longest = len;
          break;
        }
      }
    }
    return longest;
  }

  /**
   * Emits pending tokens lying within the first `chars` characters. With `cut`,
   * the token straddling the boundary is emitted with its text truncated and
   * everything after is dropped (a stop string was found there).
   */
  private take(chars: number, cut: boolean): Token[] {
    const out: Token[] = [];
    let used = 0;
    let i = 0;
    for (; i < this.pending.length; i++) {
      const token = this.pending[i]!;
      if (used + token.text.length <= chars) {
        out.push(token);
        used += token.text.length;
        continue;
      }
      if (cut && used < chars) out.push({ ...token, text: token.text.slice(0, chars - used) });
      break;
    }
    if (cut) {
      this.pending = [];
      this.pendingText = "";
    } else {
      this.pending = this.pending.slice(i);
      this.pendingText = this.pendingText.slice(used);
    }
    return out;
  }
}
