/**
 * The shared real model stories260K (trained weights, F32, SentencePiece
 * vocabulary) through the wasm engine and through llama.cpp: the same prompt
 * tokens, last-position logits within float32 summation noise, and greedy
 * continuations that are identical token for token.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { TextModel } from "@infer/core";
import type { Llama } from "node-llama-cpp";
import { SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";
import { assertLogitsClose, floatArithmetic } from "./compare.js";
import { loadOurs, runEngine, type EngineRun, type RunOptions } from "./cross-check.js";
import { closeLlama, LlamaOracle, openLlama } from "./llama-oracle.js";

const MODEL = join(SHARED_MODELS, "stories260K", "stories260K.gguf");
const llama = await openLlama();
const skip =
  typeof llama === "string" ? llama : (skipWithoutSharedModels() || (existsSync(MODEL) ? false : `${MODEL} is missing`));

/** "" is BOS alone: the start of llama2.c's published greedy text. */
const RUN: RunOptions = {
  prompts: ["", "Once upon a time", "The little dog was sad because"],
  greedySteps: 64,
  contextLength: 256,
};

describe("stories260K: the wasm engine agrees with llama.cpp", { skip }, () => {
  let model: TextModel | undefined;
  let oracle: LlamaOracle | undefined;
  let ours: EngineRun;

  async function open(): Promise<{ model: TextModel; oracle: LlamaOracle }> {
    if (!model) {
      model = await loadOurs(MODEL, RUN.contextLength);
      ours = await runEngine(model, RUN);
    }
    if (!oracle) {
      const opened = await LlamaOracle.open(llama as Llama, MODEL, RUN.contextLength);
      assert.ok(typeof opened !== "string", String(opened));
      oracle = opened;
    }
    return { model, oracle };
  }

  after(async () => {
    await model?.close();
    await oracle?.close();
    await closeLlama();
  });

  it("prompts tokenize the same and their last-position logits match (cosine >= 0.999, float32 noise)", async (t) => {
    const { oracle } = await open();
    for (const [i, prompt] of RUN.prompts.entries()) {
      const ids = oracle.tokenize(prompt);
      assert.deepEqual(ours.ids[i], ids, `prompt ${JSON.stringify(prompt)} tokenizes the same in llama.cpp`);
      const theirs = await oracle.lastLogits(ids);
      const { cosine, relative } = assertLogitsClose(ours.logits[i]!, theirs, floatArithmetic("llama"), `prompt ${JSON.stringify(prompt)}`);
      t.diagnostic(`${JSON.stringify(prompt)}: cosine ${cosine.toFixed(7)}, max |Δ| ${relative.toPrecision(2)} of the spread`);
    }
  });

  it(`greedy decoding gives the same ${RUN.greedySteps} tokens for every prompt`, async (t) => {
    const { model, oracle } = await open();
    for (const prompt of RUN.prompts) {
      const generated = await model.generateText(prompt, { temperature: 0, maxTokens: RUN.greedySteps, ignoreEos: true });
      const theirs = await oracle.greedy(oracle.tokenize(prompt), RUN.greedySteps);
      assert.deepEqual(
        generated.tokens.map((token) => token.id),
        theirs.tokens,
        `greedy continuation of ${JSON.stringify(prompt)}`,
      );
      t.diagnostic(`${JSON.stringify(prompt)}: smallest top-2 gap ${Math.min(...theirs.relativeGaps).toPrecision(2)} of the spread`);
    }
  });
});
