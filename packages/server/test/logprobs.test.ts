/**
 * Log-probabilities through the OpenAI client, over a real wasm model (a small
 * random GGUF): chat and legacy completions, whole and streamed, checked for
 * the properties log-probabilities must have and against the model's own
 * tokens from a direct contract call.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type GenerateOptions, loadModel, type Message, type TextModel, type Token } from "@infer/core";
import "@infer/core/node";
import OpenAI from "openai";
import { createServer, type InferServer } from "../src/index.js";
import { FakeModel } from "./fake-model.js";

// The engine registers itself on import; this package does not depend on it, so it is loaded by name.
await import("@infer/wasm" as string);
const { writeRandomGguf } = (await import("@infer/wasm/testing" as string)) as {
  writeRandomGguf(path: string, spec: { architecture: "qwen2"; seed: number }): Promise<unknown>;
};

const CHAT_TEMPLATE =
  "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

/**
 * The random model has no chat template of its own: this view of it passes one
 * with every direct chat call (the server is given it through `chatTemplates`).
 */
function withChatTemplate(model: TextModel): TextModel {
  return new Proxy(model, {
    get(target, key) {
      if (key === "chat" || key === "chatText") {
        return (messages: Message[], options: GenerateOptions = {}) => target[key](messages, { chatTemplate: CHAT_TEMPLATE, ...options });
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const decoder = new TextDecoder();
const MESSAGES: Message[] = [{ role: "user", content: "hello" }];
const TOP = 3;

type ChatEntry = OpenAI.Chat.Completions.ChatCompletionTokenLogprob;

/** What every chat entry of a greedy answer must satisfy. */
function checkChatEntries(entries: ChatEntry[], top: number): void {
  assert.ok(entries.length > 0, "no logprobs entries");
  let sameText = 0;
  for (const entry of entries) {
    assert.ok(Number.isFinite(entry.logprob) && entry.logprob <= 0, `logprob ${entry.logprob}`);
    assert.equal(decoder.decode(Uint8Array.from(entry.bytes!)), entry.token);
    assert.equal(entry.top_logprobs.length, top);
    entry.top_logprobs.forEach((alt, i) => {
      assert.ok(alt.logprob <= 0 && (i === 0 || alt.logprob <= entry.top_logprobs[i - 1]!.logprob), "alternatives sorted, most likely first");
      assert.equal(decoder.decode(Uint8Array.from(alt.bytes!)), alt.token);
    });
    const mass = entry.top_logprobs.reduce((sum, alt) => sum + Math.exp(alt.logprob), 0);
    assert.ok(mass <= 1 + 1e-6, `alternatives hold ${mass} of the probability`);
    if (top === 0) continue;
    // Greedy: the chosen token is the most likely one.
    assert.equal(entry.logprob, entry.top_logprobs[0]!.logprob);
    // A token's text in the stream equals its own spelling unless it is part of a character split over tokens.
    if (entry.token && !entry.token.includes("\uFFFD")) {
      assert.equal(entry.token, entry.top_logprobs[0]!.token);
      sameText++;
    }
  }
  if (top > 0) assert.ok(sameText > 0, "no entry could be compared by text");
}

/** The entries the server should derive from the model's tokens. */
function expectedEntries(tokens: Token[]) {
  const bytes = (text: string) => Array.from(new TextEncoder().encode(text));
  return tokens.map((t) => ({
    token: t.text,
    logprob: t.logprob,
    bytes: bytes(t.text),
    top_logprobs: (t.topLogprobs ?? []).map((alt) => ({ token: alt.text, logprob: alt.logprob, bytes: bytes(alt.text) })),
  }));
}

describe("logprobs over a random wasm model", () => {
  let dir: string;
  let model: TextModel;
  let server: InferServer;
  let openai: OpenAI;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-server-logprobs-"));
    const path = join(dir, "qwen2.gguf");
    await writeRandomGguf(path, { architecture: "qwen2", seed: 1 });
    model = withChatTemplate(await loadModel(path, { backend: "wasm", threads: 1 }));
    server = createServer({ models: { random: model, fake: new FakeModel() }, chatTemplates: { random: CHAT_TEMPLATE } });
    const { url } = await server.listen(0, "127.0.0.1");
    openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await server.close();
    await model.close();
    await rm(dir, { recursive: true, force: true });
  });

  const chatBody: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
    model: "random",
    messages: [{ role: "user", content: MESSAGES[0]!.content }],
    max_tokens: 10,
    temperature: 0,
    logprobs: true,
    top_logprobs: TOP,
  };

  test("chat: entries per token, the model's own numbers, streamed the same", async () => {
    const whole = await openai.chat.completions.create(chatBody);
    const content = whole.choices[0]!.logprobs!.content!;
    checkChatEntries(content, TOP);
    assert.equal(whole.choices[0]!.logprobs!.refusal, null);
    assert.equal(content.map((e) => e.token).join(""), whole.choices[0]!.message.content);
    const direct = await model.chatText(MESSAGES, { maxTokens: 10, temperature: 0, logprobs: TOP });
    assert.deepEqual(content, expectedEntries(direct.tokens));

    const stream = await openai.chat.completions.create({ ...chatBody, stream: true as const });
    const streamed: ChatEntry[] = [];
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) assert.ok(choice.logprobs?.content?.length, "a chunk with text carries its tokens' logprobs");
      streamed.push(...(choice?.logprobs?.content ?? []));
    }
    assert.deepEqual(streamed, content);
  });

  test("chat: logprobs without top_logprobs gives entries with no alternatives", async () => {
    const answer = await openai.chat.completions.create({ ...chatBody, top_logprobs: undefined });
    const content = answer.choices[0]!.logprobs!.content!;
    checkChatEntries(content, 0);
    const plain = await openai.chat.completions.create({ ...chatBody, logprobs: undefined, top_logprobs: undefined });
    assert.equal(plain.choices[0]!.logprobs, null);
    assert.equal(plain.choices[0]!.message.content, answer.choices[0]!.message.content);
  });

  test("completions: legacy arrays, offsets into the text, streamed the same", async () => {
    const body: OpenAI.CompletionCreateParamsNonStreaming = { model: "random", prompt: "hello", max_tokens: 10, temperature: 0, logprobs: TOP };
    const whole = await openai.completions.create(body);
    const { text } = whole.choices[0]!;
    const logprobs = whole.choices[0]!.logprobs!;
    const tokens = logprobs.tokens!;
    assert.ok(tokens.length > 0);
    assert.equal(tokens.join(""), text);
    assert.equal(logprobs.token_logprobs!.length, tokens.length);
    assert.equal(logprobs.top_logprobs!.length, tokens.length);
    const chars = Array.from(text);
    tokens.forEach((token, i) => {
      const offset = logprobs.text_offset![i]!;
      assert.equal(chars.slice(offset, offset + Array.from(token).length).join(""), token);
      const chosen = logprobs.token_logprobs![i]!;
      assert.ok(chosen <= 0);
      // Alternatives spelled alike share one key, so there may be fewer than asked.
      const values = Object.values(logprobs.top_logprobs![i]!);
      assert.ok(values.length >= 1 && values.length <= TOP);
      assert.ok(values.every((v, k) => v <= 0 && (k === 0 || v <= values[k - 1]!)));
      assert.ok(values.reduce((sum, v) => sum + Math.exp(v), 0) <= 1 + 1e-6);
      assert.equal(values[0], chosen, "greedy: the chosen token is the most likely");
    });
    const direct = await model.generateText("hello", { maxTokens: 10, temperature: 0, logprobs: TOP });
    assert.deepEqual(
      logprobs.token_logprobs,
      direct.tokens.map((t) => t.logprob),
    );

    const stream = await openai.completions.create({ ...body, stream: true as const });
    const joined = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as Record<string, number>[], text_offset: [] as number[] };
    for await (const chunk of stream) {
      const part = chunk.choices[0]?.logprobs;
      if (chunk.choices[0]?.text) assert.ok(part?.tokens?.length, "a chunk with text carries its tokens' logprobs");
      if (!part) continue;
      joined.tokens.push(...part.tokens!);
      joined.token_logprobs.push(...part.token_logprobs!);
      joined.top_logprobs.push(...part.top_logprobs!);
      joined.text_offset.push(...part.text_offset!);
    }
    assert.deepEqual(joined, logprobs);
  });

  test("batched completions with different logprobs settings each get their own", async () => {
    const ask = (logprobs: number | undefined) =>
      openai.completions.create({ model: "random", prompt: "hello", max_tokens: 6, temperature: 0, logprobs });
    const alone = await Promise.all([ask(2), ask(undefined)].map(async (p) => (await p).choices[0]!));
    const together = (await Promise.all([ask(2), ask(undefined), ask(2), ask(undefined)])).map((c) => c.choices[0]!);
    assert.equal(alone[1]!.logprobs, null);
    assert.ok(alone[0]!.logprobs!.tokens!.length > 0);
    for (const [i, choice] of together.entries()) {
      assert.equal(choice.text, alone[i % 2]!.text);
      assert.deepEqual(choice.logprobs, alone[i % 2]!.logprobs);
    }
  });

  test("batches group requests by their logprobs setting", async () => {
    const fake = new FakeModel(40);
    fake.capabilities = { "probe.logits": "supported" };
    const batching = createServer({ models: { story: fake } });
    try {
      const { url } = await batching.listen(0, "127.0.0.1");
      const client = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
      const ask = (prompt: string, logprobs?: number) => client.completions.create({ model: "story", prompt, max_tokens: 3, logprobs });
      const first = ask("p0");
      // While p0 decodes (40 ms a step), the others wait and are grouped.
      while (fake.batches.length === 0) await new Promise((r) => setTimeout(r, 2));
      const answers = await Promise.all([first, ask("p1", 2), ask("p2"), ask("p3", 2), ask("p4", 1)]);
      // Equal options share a batch; logprobs 2, 1 and none are three different requests to the model.
      const groups = fake.batches.map((b) => [...b].sort().join(","));
      assert.deepEqual(groups.sort(), ["p0", "p1,p3", "p2", "p4"]);
      const logprobsAsked = answers.map((a) => a.choices[0]!.logprobs !== null);
      assert.deepEqual(logprobsAsked, [false, true, false, true, true]);
    } finally {
      await batching.close();
    }
  });

  test("bad combinations and models without logits answer 400 naming the field", async () => {
    const refused = async (request: Promise<unknown>, param: string, message?: RegExp) => {
      await assert.rejects(request, (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.equal(error.param, param);
        if (message) assert.match(error.message, message);
        return true;
      });
    };
    await refused(openai.chat.completions.create({ ...chatBody, model: "fake" }), "logprobs", /fake.*cannot report logprobs/);
    await refused(openai.completions.create({ model: "fake", prompt: "x", logprobs: 1 }), "logprobs", /cannot report logprobs/);
    await refused(openai.chat.completions.create({ ...chatBody, logprobs: false }), "top_logprobs");
    await refused(openai.chat.completions.create({ ...chatBody, top_logprobs: 21 }), "top_logprobs");
    await refused(openai.completions.create({ model: "random", prompt: "x", logprobs: 6 }), "logprobs");
    await refused(openai.completions.create({ model: "random", prompt: "x", logprobs: 1, echo: true }), "echo", /prompt/);
  });
});
