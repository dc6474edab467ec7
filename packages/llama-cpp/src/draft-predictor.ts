import type { LlamaContextSequence, Token, TokenPredictor } from "node-llama-cpp";
import type { NodeLlamaCpp } from "./runtime.js";

/** Draft tokens proposed per target step at most. */
const MAX_DRAFT_TOKENS = 8;
/** The draft stops proposing at the first token it gives less probability than this. */
const MIN_DRAFT_CONFIDENCE = 0.6;

/**
 * The draft side of classic speculative decoding, on request: when the target
 * sequence asks for predictions, the draft catches up on the tokens the target
 * has accepted and proposes up to MAX_DRAFT_TOKENS greedy tokens, which the
 * target then verifies in one batch (a refuted guess costs speed, never output).
 *
 * Written here instead of using node-llama-cpp's DraftSequenceTokenPredictor
 * (3.22.1): that one drafts in the background, and when a refutation aborts its
 * loop while the target is already waiting for predictions, nothing resolves
 * the wait. The target then hangs for good, or Node exits with the promise
 * pending (seen in CI; reproduced here about once per few hundred generations
 * with the other core busy). Drafting only inside predictTokens() leaves no
 * such window; it gives up the overlap of drafting with verification.
 */
export function createDraftPredictor(library: NodeLlamaCpp, draft: LlamaContextSequence): TokenPredictor {
  class OnRequestDraftPredictor extends library.TokenPredictor {
    /** The target's tokens: its context and the token it evaluates next. */
    private accepted: Token[] = [];
    private disposed = false;

    reset({ stateTokens }: { stateTokens: Token[] }): void {
      this.accepted = stateTokens.slice();
    }

    pushTokens(tokens: Token[]): void {
      this.accepted.push(...tokens);
    }

    async predictTokens(): Promise<Token[]> {
      const accepted = this.accepted;
      // Near the end of the context the draft would need a context shift; the
      // target does not validate predictions there either.
      if (this.disposed || accepted.length === 0 || accepted.length + MAX_DRAFT_TOKENS >= draft.context.contextSize) return [];
      // Keep what the draft already evaluated of the accepted tokens, but always
      // evaluate the last one again: its logits give the first guess.
      const held = draft.contextTokens;
      let kept = 0;
      while (kept < held.length && kept < accepted.length - 1 && held[kept] === accepted[kept]) kept++;
      if (kept < draft.nextTokenIndex) await draft.eraseContextTokenRanges([{ start: kept, end: draft.nextTokenIndex }]);

      const guesses: Token[] = [];
      for await (const { token, confidence } of draft.evaluateWithMetadata(accepted.slice(kept), { confidence: true }, { temperature: 0 })) {
        if (this.disposed || confidence < MIN_DRAFT_CONFIDENCE) break;
        guesses.push(token);
        if (guesses.length >= MAX_DRAFT_TOKENS) break;
      }
      return guesses;
    }

    override dispose(): void {
      this.disposed = true;
    }
  }
  return new OnRequestDraftPredictor();
}
