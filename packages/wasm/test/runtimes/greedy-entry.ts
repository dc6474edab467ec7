/**
 * Run by runtimes.test.ts in Node, Bun and Deno: greedy text of both shared
 * models through the packages as an application imports them (their built
 * bundles, by name), printed as one JSON line. Argument: the shared models folder.
 * The kernel build is the runtime's default pick unless INFER_WASM_KERNELS says otherwise.
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { loadModel } from "@infer/core";
import { relaxedSimdSupported } from "@infer/wasm";

export interface GreedyRun {
  relaxedSimd: boolean;
  /** stories260K.gguf: 200 greedy tokens from BOS. */
  stories: { ids: number[]; text: string };
  /** TinyStories-656K: the published prompt, 100 greedy tokens. */
  tinyStories: { ids: number[]; text: string };
}

const shared = process.argv[2];
if (!shared) throw new Error("usage: greedy-entry.js <shared models folder>");

async function greedy(path: string, prompt: string, maxTokens: number): Promise<{ ids: number[]; text: string }> {
  const model = await loadModel(path, { backend: "wasm", threads: 2 });
  try {
    const result = await model.generateText(prompt, { temperature: 0, maxTokens });
    return { ids: result.tokens.map((token) => token.id), text: result.text };
  } finally {
    await model.close();
  }
}

const tinyPrompt = (JSON.parse(readFileSync(`${shared}/tinystories-656k/expected-greedy-100.json`, "utf8")) as { prompt: string }).prompt;
const run: GreedyRun = {
  relaxedSimd: relaxedSimdSupported(),
  stories: await greedy(`${shared}/stories260K/stories260K.gguf`, "", 200),
  tinyStories: await greedy(`${shared}/tinystories-656k`, tinyPrompt, 100),
};
process.stdout.write(`${JSON.stringify(run)}\n`);
