#!/usr/bin/env node
// Prefix reuse in a multi-turn chat (not a test): for each local backend, a
// five-turn greedy chat with reuse on (the default) and off (promptCacheBytes 0),
// reporting per turn the prompt tokens, those reused, and the time to the first
// token. The figures behind docs/performance.md's "Prefix reuse".
//
//   node packages/wasm/bench/prefix-reuse.mjs [model.gguf] [--runs N]
//
// Default model: ../shared/models/stories260K/stories260K.gguf. Each figure is the
// median over --runs chats (default 3). llama_cpp is measured when its package
// can be imported. Build first.
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadModel } from "@infer/core";
import { PLAIN_CHAT_TEMPLATE } from "@infer/core/testing";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const { values, positionals } = parseArgs({ allowPositionals: true, options: { runs: { type: "string", default: "3" } } });
const model = positionals[0] ?? `${root}../shared/models/stories260K/stories260K.gguf`;
if (!existsSync(model)) throw new Error(`no model at ${model}`);
const runs = Number(values.runs);

const USER_TURNS = [
  "Once upon a time there was a little girl named Lily. She liked to play in the park with her big red ball every day.",
  "One day the ball rolled away into the tall grass. What did Lily do?",
  "Her friend Tom came to help her look for it. Where did they look first?",
  "They found a small dog with the ball in its mouth. How did the dog feel?",
  "At the end of the day Lily went home happy. What did she tell her mom?",
];

const backends = ["wasm"];
if (await import("@infer/llama-cpp").then(() => true, () => false)) backends.push("llama_cpp");
await import("@infer/wasm");

/** One chat: per turn, prompt tokens, reused tokens and time to the first token (ms). */
async function chat(loaded) {
  const messages = [];
  const turns = [];
  for (const content of USER_TURNS) {
    messages.push({ role: "user", content });
    const started = performance.now();
    let firstAt = 0;
    let reply = "";
    for await (const token of loaded.chat(messages, { temperature: 0, maxTokens: 24, chatTemplate: PLAIN_CHAT_TEMPLATE })) {
      firstAt ||= performance.now();
      reply += token.text;
    }
    const { promptTokens, cachedPromptTokens } = loaded.metrics();
    turns.push({ promptTokens, cachedPromptTokens, ttftMs: firstAt - started });
    messages.push({ role: "assistant", content: reply });
  }
  return turns;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const backend of backends) {
  for (const reuse of [true, false]) {
    const all = [];
    // A fresh load per chat, so no chat finds another's turns cached; the first is a warm-up.
    for (let i = 0; i <= runs; i++) {
      const loaded = await loadModel(model, { backend, threads: 1, contextLength: 1024, ...(reuse ? {} : { promptCacheBytes: 0 }) });
      const turns = await chat(loaded);
      await loaded.close();
      if (i > 0) all.push(turns);
    }
    const rows = all[0].map((turn, t) => ({
      ...turn,
      ttftMs: median(all.map((r) => r[t].ttftMs)),
    }));
    console.log(`${backend}, reuse ${reuse ? "on" : "off"}:`);
    rows.forEach((r, t) =>
      console.log(`  turn ${t + 1}: ${r.promptTokens} prompt tokens, ${r.cachedPromptTokens} reused, ` +
        `${r.promptTokens - r.cachedPromptTokens} evaluated, first token after ${r.ttftMs.toFixed(2)} ms`),
    );
  }
}
