import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token, TokenPredictor } from "node-llama-cpp";
import { createDraftPredictor } from "../src/draft-predictor.js";
import { getRuntime, nodeLlamaCpp } from "../src/runtime.js";
import { skipWithoutStories, STORIES_GGUF } from "./fixtures.js";

/**
 * The draft predictor against llama.cpp's own greedy decoding of the same
 * model: whatever the target accepted before (its own guesses, a token the
 * draft did not expect, a new prompt), the guesses must be exactly the start of
 * the greedy continuation of the accepted tokens.
 */
describe("draft predictor", { skip: skipWithoutStories }, () => {
  let model: LlamaModel;
  let context: LlamaContext;
  let predictor: TokenPredictor;

  before(async () => {
    const llama = await getRuntime();
    model = await llama.loadModel({ modelPath: STORIES_GGUF });
    context = await model.createContext({ contextSize: 256, sequences: 2, threads: { ideal: 1, min: 1 } });
    predictor = createDraftPredictor(await nodeLlamaCpp(), context.getSequence());
  });
  after(async () => {
    await context?.dispose();
    await model?.dispose();
  });

  /** The first `count` greedy tokens after `tokens`, on a fresh sequence. */
  async function greedy(tokens: Token[], count: number): Promise<Token[]> {
    const sequence = context.getSequence();
    try {
      const out: Token[] = [];
      for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
        out.push(token);
        if (out.length === count) break;
      }
      return out;
    } finally {
      sequence.dispose();
    }
  }

  test("guesses continue the accepted tokens greedily after each kind of change", async () => {
    // This predictor reads only the accepted tokens, never the target sequence.
    const targetSequence = undefined as unknown as LlamaContextSequence;
    let accepted = [...model.tokenize("Once upon a time")];
    let guessed = 0;
    const check = async (label: string) => {
      const guesses = await predictor.predictTokens();
      const expected = await greedy(accepted, guesses.length + 1);
      assert.deepEqual(guesses, expected.slice(0, guesses.length), label);
      guessed += guesses.length;
      return expected;
    };

    await predictor.reset({ stateTokens: accepted, targetSequence, evaluateOptions: {} });
    const first = await check("after reset");
    // The target accepted the first guess (or, without one, the greedy token).
    predictor.pushTokens([first[0]!]);
    accepted.push(first[0]!);
    const second = await check("after an accepted token");
    // A token the draft did not propose (as when sampling refutes a guess).
    const unexpected = (second[0]! === 300 ? 301 : 300) as Token;
    predictor.pushTokens([unexpected]);
    accepted.push(unexpected);
    await check("after an unexpected token");
    accepted = [...model.tokenize("The dog")];
    await predictor.reset({ stateTokens: accepted, targetSequence, evaluateOptions: {} });
    await check("after a reset to another prompt");
    assert.ok(guessed > 0, "the draft guessed nothing with confidence; the checks above compared empty lists");
  });
});
