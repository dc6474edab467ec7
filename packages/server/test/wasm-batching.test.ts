/**
 * Concurrent streaming chat requests against a real wasm model (a small
 * random qwen2 GGUF, its chat template given through the server) share
 * batchGenerate calls, and each streamed answer equals the model's own answer
 * to that request alone (a direct chatText call, no batching involved),
 * logprobs included.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { type BatchGenerateOptions, type BatchPrompt, loadModel, type TextModel, type Token } from "@infer/core";
import "@infer/core/node";
import OpenAI from "openai";
import { createServer } from "../src/index.js";

// The engine registers itself on import; this package does not depend on it, so it is loaded by name.
await import("@infer/wasm" as string);
const { writeRandomGguf } = (await import("@infer/wasm/testing" as string)) as {
  writeRandomGguf(path: string, spec: { architecture: "qwen2"; seed: number }): Promise<unknown>;
};

const CHAT_TEMPLATE =
  "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The model with its batchGenerate calls recorded (their sizes), the first one
 * held until `open()` so that the other requests queue up behind it.
 */
function gated(model: TextModel) {
  const sizes: number[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const view = new Proxy(model, {
    get(target, key) {
      if (key === "batchGenerate") {
        return async (prompts: BatchPrompt[], options?: BatchGenerateOptions) => {
          sizes.push(prompts.length);
          if (sizes.length === 1) await gate;
          return target.batchGenerate(prompts, options);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { view, sizes, open };
}

interface Streamed {
  text: string;
  finish: string | null;
  logprobs: OpenAI.Chat.Completions.ChatCompletionTokenLogprob[];
  usage?: OpenAI.CompletionUsage;
}

interface ChatAsk {
  content: string;
  maxTokens: number;
  stop?: string;
  /** top_logprobs, with logprobs: true. */
  top?: number;
}

async function streamChat(openai: OpenAI, r: ChatAsk): Promise<Streamed> {
  const stream = await openai.chat.completions.create({
    model: "random",
    messages: [{ role: "user", content: r.content }],
    max_tokens: r.maxTokens,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
    ...(r.stop === undefined ? {} : { stop: r.stop }),
    ...(r.top === undefined ? {} : { logprobs: true, top_logprobs: r.top }),
  });
  const answer: Streamed = { text: "", finish: null, logprobs: [] };
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    answer.text += choice?.delta.content ?? "";
    answer.finish = choice?.finish_reason ?? answer.finish;
    answer.logprobs.push(...(choice?.logprobs?.content ?? []));
    answer.usage = chunk.usage ?? answer.usage;
  }
  return answer;
}

/** The chat entries the server should make of the model's tokens. */
function expectedEntries(tokens: Token[]) {
  const bytes = (text: string) => Array.from(new TextEncoder().encode(text));
  return tokens.map((t) => ({
    token: t.text,
    logprob: t.logprob,
    bytes: bytes(t.text),
    top_logprobs: (t.topLogprobs ?? []).map((alt) => ({ token: alt.text, logprob: alt.logprob, bytes: bytes(alt.text) })),
  }));
}

test("concurrent streaming chats over a wasm model share batches and stream what each would get alone", { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-server-batching-"));
  const path = join(dir, "qwen2.gguf");
  await writeRandomGguf(path, { architecture: "qwen2", seed: 3 });
  const model = await loadModel(path, { backend: "wasm", threads: 1 });
  const { view, sizes, open } = gated(model);
  const server = createServer({ models: { random: view }, chatTemplates: { random: CHAT_TEMPLATE } });
  try {
    const { url } = await server.listen(0, "127.0.0.1");
    const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
    const alone = (r: ChatAsk) =>
      model.chatText([{ role: "user", content: r.content }], {
        chatTemplate: CHAT_TEMPLATE,
        maxTokens: r.maxTokens,
        temperature: 0,
        ...(r.stop === undefined ? {} : { stopStrings: [r.stop] }),
        ...(r.top === undefined ? {} : { logprobs: r.top }),
      });
    // A stop string the model really meets: two characters from the middle of an answer.
    const story = (await alone({ content: "tell me a story", maxTokens: 12 })).text;
    const stop = Array.from(story).slice(4, 6).join("");
    assert.equal(Array.from(stop).length, 2, `the answer '${story}' is too short to take a stop string from`);
    // Different prompts; the last two ask for logprobs, so they form a batch of their own.
    const requests: ChatAsk[] = [
      { content: "first", maxTokens: 12 },
      { content: "hello there", maxTokens: 12 },
      { content: "tell me a story", maxTokens: 12, stop },
      { content: "x", maxTokens: 12 },
      { content: "what is 2+2?", maxTokens: 12 },
      { content: "hello there", maxTokens: 8, top: 2 },
      { content: "bye", maxTokens: 8, top: 2 },
    ];
    const first = streamChat(openai, requests[0]!);
    while (sizes.length === 0) await sleep(2);
    const rest = requests.slice(1).map((r) => streamChat(openai, r));
    // Every other request waits behind the held first batch before it is let go.
    const queued = new RegExp(`^infer_queue_depth\\{model="random"\\} ${requests.length - 1}$`, "m");
    while (!queued.test(await (await fetch(`${url}/metrics`)).text())) await sleep(5);
    open();
    const answers = [await first, ...(await Promise.all(rest))];

    assert.deepEqual(sizes, [1, 4, 2], "7 requests in 3 batchGenerate calls");
    for (const [i, r] of requests.entries()) {
      const expected = await alone(r);
      assert.ok(expected.tokens.length > 0, `request ${i} generated nothing`);
      assert.equal(answers[i]!.text, expected.text, `request ${i}: streamed text`);
      assert.equal(answers[i]!.finish, expected.finishReason === "length" ? "length" : "stop", `request ${i}: finish reason`);
      // Usage per request, though the batch's metrics sum its prompts: the server counts each with the tokenizer.
      assert.equal(answers[i]!.usage?.prompt_tokens, expected.metrics.promptTokens, `request ${i}: prompt tokens`);
      assert.equal(answers[i]!.usage?.completion_tokens, expected.tokens.length, `request ${i}: completion tokens`);
      if (r.top === undefined) assert.deepEqual(answers[i]!.logprobs, []);
      else assert.deepEqual(answers[i]!.logprobs, expectedEntries(expected.tokens), `request ${i}: logprobs`);
    }
    assert.ok(answers[2]!.text.length < story.length && answers[2]!.finish === "stop", "the stop string cut its answer short");
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^infer_batches_total\{model="random"\} 3$/m);
    assert.match(metrics, /^infer_batched_requests_total\{model="random"\} 7$/m);
  } finally {
    await server.close();
    await model.close();
    await rm(dir, { recursive: true, force: true });
  }
});
