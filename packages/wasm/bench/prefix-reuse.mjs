#!/usr/bin/env node
// Prefix reuse in a multi-turn chat (not a test): for each local backend, a
// five-turn greedy chat with reuse on (the default) and off (promptCacheBytes 0),
// reporting per turn the prompt tokens, those reused, the time to the first
// token with and without reuse, and their ratio (the target: turn 5
// at least 5x faster). The figures behind docs/performance.md's "Prefix reuse".
//
//   npm run bench:prefix -- [model.gguf] [--runs N] [--threads N] [--reply N]
//
// Default model: the SmolLM2-135M-shape Q8_0 bench model (random weights, written
// into .cache/bench-models when missing; see bench-models.mjs). It has no chat
// template, so every chat passes a plain "role: content" template whose
// assistant turns put the reply right after "assistant:", as the generation
// prompt left it (the tests' PLAIN_CHAT_TEMPLATE adds a space there, which
// re-encodes differently and costs each reply its tokens). The model's
// synthetic words re-encode to the ids generated, as a real vocabulary's do,
// so a turn reuses the whole history, replies included, and evaluates the new
// user message, the template's glue and the reply's last token (sampled, never
// evaluated). Its user messages are spelt in bytes, several times the tokens a
// real vocabulary gives them, so what turn 5 evaluates is bigger than in a real chat.
// Each run loads a fresh model per backend and setting (no chat finds another's
// turns cached), alternating reuse on and off so machine noise hits both alike;
// each figure is the median over --runs runs (default 3), after one warm-up run.
// llama_cpp is measured when its package can be imported. Build first.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadModel } from "@infer/core";
import { benchModel } from "./bench-models.mjs";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    runs: { type: "string", default: "3" },
    threads: { type: "string", default: "1" },
    reply: { type: "string", default: "24" },
  },
});
const model = positionals[0] ?? (await benchModel(join(root, ".cache", "bench-models"), "smollm2", "q8_0"));
if (!existsSync(model)) throw new Error(`no model at ${model}`);
const runs = Number(values.runs);
const threads = Number(values.threads);
const replyTokens = Number(values.reply);

/** "role: content" lines; an assistant's content follows "assistant:" as generated, with no space added. */
const CHAT_TEMPLATE =
  "{% for m in messages %}{{ m.role }}:{% if m.role != 'assistant' %} {% endif %}{{ m.content }}\n{% endfor %}" +
  "{% if add_generation_prompt %}assistant:{% endif %}";

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

/** One chat on a fresh load: per turn, prompt tokens, reused tokens and time to the first token (ms). */
async function chat(backend, reuse) {
  const loaded = await loadModel(model, { backend, threads, contextLength: 4096, ...(reuse ? {} : { promptCacheBytes: 0 }) });
  try {
    const messages = [];
    const turns = [];
    for (const content of USER_TURNS) {
      messages.push({ role: "user", content });
      const started = performance.now();
      let firstAt = 0;
      let reply = "";
      const options = { temperature: 0, maxTokens: replyTokens, ignoreEos: true, chatTemplate: CHAT_TEMPLATE };
      for await (const token of loaded.chat(messages, options)) {
        firstAt ||= performance.now();
        reply += token.text;
      }
      const { promptTokens, cachedPromptTokens } = loaded.metrics();
      turns.push({ promptTokens, cachedPromptTokens, ttftMs: firstAt - started });
      messages.push({ role: "assistant", content: reply });
    }
    return turns;
  } finally {
    await loaded.close();
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`${model}, ${threads} thread(s), ${replyTokens}-token replies, median of ${runs} alternating runs`);
const summary = [];
for (const backend of backends) {
  const on = [];
  const off = [];
  for (let run = 0; run <= runs; run++) {
    const first = await chat(backend, true);
    const second = await chat(backend, false);
    if (run > 0) {
      on.push(first);
      off.push(second);
    }
  }
  console.log(`${backend}:`);
  on[0].forEach((turn, t) => {
    const withReuse = median(on.map((r) => r[t].ttftMs));
    const without = median(off.map((r) => r[t].ttftMs));
    console.log(
      `  turn ${t + 1}: ${turn.promptTokens} prompt tokens, ${turn.cachedPromptTokens} reused, ${turn.promptTokens - turn.cachedPromptTokens} evaluated; ` +
        `first token after ${withReuse.toFixed(1)} ms with reuse, ${without.toFixed(1)} ms without: ${(without / withReuse).toFixed(2)}x`,
    );
    if (t === USER_TURNS.length - 1) summary.push(`${backend} ${(without / withReuse).toFixed(2)}x`);
  });
}
console.log(`turn ${USER_TURNS.length} TTFT, without reuse / with (target >= 5x): ${summary.join(", ")}`);
