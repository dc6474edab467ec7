/**
 * One cross-check: a GGUF file through the wasm engine (loadModel, backend
 * "wasm", the public contract) and through llama.cpp; the same prompt tokens,
 * last-position logits within the case's tolerance, and greedy decoding that
 * agrees wherever llama.cpp's choice is decisive.
 */
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import { isTokenizerModel, loadModel, type TextModel } from "@infer/core";
import type { Llama } from "node-llama-cpp";
import { loadWasmModel, type Kernels } from "../../src/index.js";
import { assertGreedyAgrees, assertLogitsClose, type Tolerance } from "./compare.js";
import { LlamaOracle } from "./llama-oracle.js";

/** What the engine computed for a list of prompts. */
export interface EngineRun {
  /** [prompts] the prompt's token ids. */
  ids: number[][];
  /** [prompts] logits at the last prompt position, [vocab]. */
  logits: Float32Array[];
  /** Greedy continuation of the first prompt, EOS ignored. */
  greedy: number[];
}

export interface RunOptions {
  prompts: readonly string[];
  greedySteps: number;
  contextLength: number;
}

/**
 * The engine as users get it (loadModel, backend "wasm", its default kernels),
 * or on the given kernels (the reference kernels compute in float64 from the
 * dequantized weights, the WebAssembly ones quantize activations for some types).
 */
export async function loadOurs(path: string, contextLength: number, kernels?: Kernels): Promise<TextModel> {
  if (kernels) return loadWasmModel(path, { kernels, contextLength, parallelSlots: 1 });
  return loadModel(path, { backend: "wasm", contextLength, parallelSlots: 1 });
}

export async function runEngine(model: TextModel, options: RunOptions): Promise<EngineRun> {
  assert.ok(isTokenizerModel(model), "the wasm model exposes its tokenizer");
  const ids = options.prompts.map((prompt) => model.encode(prompt));
  const results = await model.classify([...options.prompts], { logits: true });
  const logits = results.map((result, i) => {
    assert.ok(result.logits, `classify returned no logits for prompt ${i}`);
    return result.logits;
  });
  const generated = await model.generateText(options.prompts[0]!, {
    temperature: 0,
    maxTokens: options.greedySteps,
    ignoreEos: true,
  });
  const greedy = generated.tokens.map((token) => token.id);
  assert.equal(greedy.length, options.greedySteps, "ignoreEos: the engine generated every requested token");
  return { ids, logits, greedy };
}

/**
 * Compares an engine run with llama.cpp on `llamaPath` (the same weights).
 * Returns false, after a named skip, when llama.cpp refuses the file.
 */
export async function compareWithLlama(
  t: TestContext,
  llama: Llama,
  llamaPath: string,
  ours: EngineRun,
  options: RunOptions & { tolerance: Tolerance; label: string },
): Promise<boolean> {
  const oracle = await LlamaOracle.open(llama, llamaPath, options.contextLength);
  if (typeof oracle === "string") {
    t.skip(oracle);
    return false;
  }
  try {
    const measures: string[] = [];
    for (const [i, prompt] of options.prompts.entries()) {
      const ids = oracle.tokenize(prompt);
      assert.deepEqual(ours.ids[i], ids, `${options.label}: prompt ${i} tokenizes the same in llama.cpp`);
      const theirs = await oracle.lastLogits(ids);
      const { cosine, relative } = assertLogitsClose(ours.logits[i]!, theirs, options.tolerance, `${options.label}, prompt ${i}`);
      measures.push(`cosine ${cosine.toFixed(6)}, max |Δ| ${relative.toPrecision(2)} of the spread`);
    }
    const theirs = await oracle.greedy(ours.ids[0]!, options.greedySteps);
    const agreed = assertGreedyAgrees(ours.greedy, theirs, options.tolerance, options.label);
    t.diagnostic(`${options.label}: ${measures.join("; ")}; greedy ${agreed}/${options.greedySteps} identical`);
    return true;
  } finally {
    await oracle.close();
  }
}
