/**
 * Requests that wait together are decoded together: chat and text, streaming
 * and not, each stopped on its own limits, each disconnect handled alone.
 * The fake model records every batchGenerate call; answers are compared with
 * the same requests served without batching (chat()/generate() in a slot).
 */
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { createServer, type InferServer } from "../src/index.js";
import { FakeModel, STORY } from "./fake-model.js";

const FULL = STORY.join("");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(options: Parameters<typeof createServer>[0]): Promise<{ server: InferServer; openai: OpenAI; url: string }> {
  const server = createServer(options);
  const { url } = await server.listen(0, "127.0.0.1");
  return { server, url, openai: new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 }) };
}

interface Answer {
  text: string;
  finish: string | null;
  completionTokens?: number;
  /** performance.now() when the answer was complete. */
  endedAt: number;
}

type ChatBody = Omit<OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, "model">;
type TextBody = Omit<OpenAI.CompletionCreateParamsNonStreaming, "model">;

/** One request of either kind, streamed or not, collected into text and finish reason. */
async function ask(openai: OpenAI, kind: "chat" | "text", body: ChatBody | TextBody, stream: boolean): Promise<Answer> {
  if (kind === "chat") {
    const chat = body as ChatBody;
    if (!stream) {
      const answer = await openai.chat.completions.create({ ...chat, model: "story" });
      const choice = answer.choices[0]!;
      return { text: choice.message.content ?? "", finish: choice.finish_reason, completionTokens: answer.usage?.completion_tokens, endedAt: performance.now() };
    }
    const chunks = await openai.chat.completions.create({ ...chat, model: "story", stream: true, stream_options: { include_usage: true } });
    const answer: Answer = { text: "", finish: null, endedAt: 0 };
    for await (const chunk of chunks) {
      answer.completionTokens = chunk.usage?.completion_tokens ?? answer.completionTokens;
      answer.text += chunk.choices[0]?.delta.content ?? "";
      answer.finish = chunk.choices[0]?.finish_reason ?? answer.finish;
    }
    return { ...answer, endedAt: performance.now() };
  }
  const text = body as TextBody;
  if (!stream) {
    const answer = await openai.completions.create({ ...text, model: "story" });
    const choice = answer.choices[0]!;
    return { text: choice.text, finish: choice.finish_reason, completionTokens: answer.usage?.completion_tokens, endedAt: performance.now() };
  }
  const chunks = await openai.completions.create({ ...text, model: "story", stream: true, stream_options: { include_usage: true } });
  const answer: Answer = { text: "", finish: null, endedAt: 0 };
  for await (const chunk of chunks) {
    answer.completionTokens = chunk.usage?.completion_tokens ?? answer.completionTokens;
    answer.text += chunk.choices[0]?.text ?? "";
    answer.finish = chunk.choices[0]?.finish_reason ?? answer.finish;
  }
  return { ...answer, endedAt: performance.now() };
}

interface HeldSlot {
  /** Waits until `waiting` requests are queued behind the holder, then lets the holder run and finish. */
  release(waiting: number): Promise<void>;
}

/**
 * Sends a one-token request whose batch waits at the fake's gate, so the
 * model's one slot stays busy until the test has queued what it wants.
 */
async function holdSlot(openai: OpenAI, url: string, model: FakeModel): Promise<HeldSlot> {
  let open!: () => void;
  model.gate = new Promise((resolve) => (open = resolve));
  const before = model.batches.length;
  const holder = openai.completions.create({ model: "story", prompt: "holder", max_tokens: 1 });
  while (model.batches.length === before) await sleep(2);
  return {
    async release(waiting) {
      const queued = new RegExp(`^infer_queue_depth\\{model="story"\\} ${waiting}$`, "m");
      while (!queued.test(await (await fetch(`${url}/metrics`)).text())) await sleep(5);
      open();
      await holder;
    },
  };
}

/** A raw streaming chat request; resolves once its first chunk arrived, with a way to hang up. */
function openStream(url: string, content: string): Promise<{ hangUp: () => void; body: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      const body = new Promise<string>((done) => {
        res.on("data", (chunk: Buffer) => (text += chunk.toString()));
        res.on("end", () => done(text));
        res.on("close", () => done(text));
      });
      res.once("data", () => resolve({ hangUp: () => req.destroy(), body }));
    });
    req.on("error", (e) => (e.message.includes("socket hang up") ? undefined : reject(e)));
    req.end(JSON.stringify({ model: "story", messages: [{ role: "user", content }], stream: true }));
  });
}

describe("batched decoding of concurrent requests", () => {
  test("chat and text, streamed and not, with their own stop strings share one batch and answer as if alone", async () => {
    const requests: { kind: "chat" | "text"; stream: boolean; body: ChatBody | TextBody }[] = [
      { kind: "chat", stream: true, body: { messages: [{ role: "user", content: "a" }], max_tokens: 8, stop: [" upon"] } },
      { kind: "chat", stream: true, body: { messages: [{ role: "user", content: "b" }], max_tokens: 8, stop: [" time"] } },
      { kind: "text", stream: false, body: { prompt: "c", max_tokens: 8 } },
      { kind: "text", stream: true, body: { prompt: "d", max_tokens: 8, stop: "ime" } },
      { kind: "chat", stream: false, body: { messages: [{ role: "user", content: "e" }], max_tokens: 8, stop: ["ere w", "xyz"] } },
    ];
    // The reference: the same requests served one at a time without batching.
    const plain = await start({ models: { story: new FakeModel() }, maxBatch: 1 });
    const alone: Answer[] = [];
    try {
      for (const r of requests) alone.push(await ask(plain.openai, r.kind, r.body, r.stream));
    } finally {
      await plain.server.close();
    }
    assert.deepEqual(
      alone.map((a) => [a.text, a.finish]),
      [
        ["Once", "stop"],
        ["Once upon a", "stop"],
        ["Once upon a time there was a little", "length"],
        ["Once upon a t", "stop"],
        ["Once upon a time th", "stop"],
      ],
    );

    const model = new FakeModel(30);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      const holder = await holdSlot(openai, url, model);
      const answers = Promise.all(requests.map((r) => ask(openai, r.kind, r.body, r.stream)));
      await holder.release(requests.length);
      const together = await answers;
      assert.deepEqual(
        together.map((a) => [a.text, a.finish, a.completionTokens]),
        alone.map((a) => [a.text, a.finish, a.completionTokens]),
      );
      assert.deepEqual(model.batches.map((b) => b.length), [1, 5], "the holder's batch, then one batch for all five");
      assert.deepEqual(model.batches[1]!.sort(), ["c", "d", "user: a\nassistant:", "user: b\nassistant:", "user: e\nassistant:"]);
      // The batch runs without stop strings; the server matches each request's own.
      assert.equal(model.batchOptions[1]!.maxTokens, 8);
      assert.deepEqual(model.batchOptions[1]!.stopStrings, []);
      // A request that is done ends for its client at once, not when its batch ends (30 ms a step).
      assert.ok(together[0]!.endedAt < together[2]!.endedAt - 100, "the stream stopped after 2 tokens ended long before the 8-token answer");
    } finally {
      await server.close();
    }
  });

  test("stop strings across tokens in batched streaming: applied once, by the model; no token decoded past them", async () => {
    const model = new FakeModel(10);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      const holder = await holdSlot(openai, url, model);
      // "e u" spans "Once" and " upon"; "a t" spans " a" and " time"; the third request has no stop string.
      const stops = ["e u", "a t", undefined];
      const asked = Promise.all(
        stops.map((stop, i) => ask(openai, "text", { prompt: `p${i}`, max_tokens: 6, ...(stop ? { stop } : {}) }, true)),
      );
      await holder.release(3);
      const answers = await asked;
      assert.deepEqual(
        answers.map((a) => [a.text, a.finish]),
        [
          ["Onc", "stop"],
          ["Once upon ", "stop"],
          ["Once upon a time there was", "length"],
        ],
      );
      assert.deepEqual([...model.batches[1]!].sort(), ["p0", "p1", "p2"], "the three requests shared one batch");
      assert.deepEqual(model.batchOptions[1]!.stopStrings, []);
      // Each sequence was decoded up to the token that completed its stop string (or max_tokens), no further.
      const decoded = Object.fromEntries(model.batches[1]!.map((prompt, i) => [prompt, model.decodedPerPrompt[1]![i]]));
      assert.deepEqual(decoded, { p0: 2, p1: 4, p2: 6 });
    } finally {
      await server.close();
    }
  });

  test("a request whose prompt ends on EOS mid-batch is answered then, not when the batch ends", async () => {
    const model = new FakeModel(30);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      const holder = await holdSlot(openai, url, model);
      const brief = { messages: [{ role: "user" as const, content: "brief" }], max_tokens: 8 };
      const long = { messages: [{ role: "user" as const, content: "long" }], max_tokens: 8 };
      const answers = Promise.all([ask(openai, "chat", brief, true), ask(openai, "chat", long, false)]);
      await holder.release(2);
      const [short, full] = await answers;
      assert.deepEqual(model.batches.map((b) => b.length), [1, 2], "both requests shared one batch");
      assert.deepEqual([short.text, short.finish], ["Once upon", "stop"]);
      assert.deepEqual([full.finish, full.completionTokens], ["length", 8]);
      // 30 ms a step: the two-token answer closes about six steps before the eight-token one.
      assert.ok(short.endedAt < full.endedAt - 100, `EOS answer ended at ${short.endedAt}, the batch at ${full.endedAt}`);
    } finally {
      await server.close();
    }
  });

  test("requests with other batch-wide options wait for a batch of their own", async () => {
    const model = new FakeModel(20);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      const holder = await holdSlot(openai, url, model);
      const chat = (content: string, extra: Partial<ChatBody> = {}) => ask(openai, "chat", { messages: [{ role: "user", content }], max_tokens: 3, ...extra }, true);
      const asked = Promise.all([
        chat("x"),
        chat("y", { temperature: 0.5 }),
        chat("z", { seed: 3 }),
        chat("w", { temperature: 0.5, stop: [" a"] }),
        chat("v", { max_tokens: 2 }),
      ]);
      await holder.release(5);
      const answers = await asked;
      assert.deepEqual(
        answers.map((a) => [a.text, a.finish]),
        [
          ["Once upon a", "length"],
          ["Once upon a", "length"],
          ["Once upon a", "length"],
          ["Once upon", "stop"],
          ["Once upon", "length"],
        ],
      );
      // Which group goes first depends on which request arrived first; the groups do not.
      // Another max_tokens is another batch: a backend flushes an incomplete character into a sequence's last token.
      const groups = model.batches.slice(1).map((b) => b.map((p) => p[6]).sort().join(""));
      assert.deepEqual([...groups].sort(), ["v", "wy", "x", "z"]);
      assert.equal(model.batchOptions[1 + groups.indexOf("wy")]!.temperature, 0.5);
      assert.equal(model.batchOptions[1 + groups.indexOf("z")]!.seed, 3);
      assert.equal(model.batchOptions[1 + groups.indexOf("x")]!.seed, undefined);
    } finally {
      await server.close();
    }
  });

  test("a chat prompt that cannot be rendered fails alone with its own HTTP status", async () => {
    const model = new FakeModel(20);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      const holder = await holdSlot(openai, url, model);
      const asked = Promise.allSettled([
        ask(openai, "chat", { messages: [{ role: "user", content: "fine" }] }, true),
        ask(openai, "chat", { messages: [{ role: "user", content: "unrenderable" }] }, true),
      ]);
      await holder.release(2);
      const [good, bad] = await asked;
      assert.equal(good.status === "fulfilled" && good.value.text, FULL);
      assert.ok(bad.status === "rejected" && bad.reason instanceof OpenAI.BadRequestError, String(bad.status === "rejected" && bad.reason));
      assert.equal((bad.reason as InstanceType<typeof OpenAI.BadRequestError>).code, "no_chat_template");
      // Both rode in one batchGenerate call; only the good prompt reached the decoder.
      assert.deepEqual(model.batches[1], ["user: fine\nassistant:"]);
    } finally {
      await server.close();
    }
  });

  test("a disconnected member is dropped while the rest of its batch goes on; a batch whose clients all left is aborted", async () => {
    const words = Array<string>(40).fill(" word");
    const model = new FakeModel(15, words);
    const { server, openai, url } = await start({ models: { story: model } });
    try {
      let holder = await holdSlot(openai, url, model);
      const opened = Promise.all([openStream(url, "leaves"), openStream(url, "stays")]);
      await holder.release(2);
      const [leaving, staying] = await opened;
      assert.equal(model.batches[1]!.length, 2, "both streams share a batch");
      // The holder wanted 1 of the 40 tokens: its batch was aborted once it had it.
      assert.equal(model.aborts, 1);
      leaving.hangUp();
      const kept = await staying.body;
      const text = kept
        .split("\n\n")
        .filter((line) => line.startsWith("data: {"))
        .map((line) => (JSON.parse(line.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? "")
        .join("");
      assert.equal(text, words.join(""), "the staying client got its whole answer");
      assert.match(kept, /data: \[DONE\]\n\n$/);
      assert.equal(model.aborts, 1, "the batch ran on for the staying client");

      holder = await holdSlot(openai, url, model);
      const openedBoth = Promise.all([openStream(url, "one"), openStream(url, "two")]);
      await holder.release(2);
      const both = await openedBoth;
      const batches = model.batches.length;
      const aborts = model.aborts;
      for (const s of both) s.hangUp();
      const deadline = Date.now() + 5000;
      while (model.aborts === aborts && Date.now() < deadline) await sleep(5);
      assert.equal(model.aborts, aborts + 1, "the batch saw its abort once every client was gone");
      // The slot is free again.
      const next = await ask(openai, "chat", { messages: [{ role: "user", content: "x" }], max_tokens: 2 }, true);
      assert.equal(next.text, " word word");
      assert.equal(model.batches.length, batches + 1);
    } finally {
      await server.close();
    }
  });
});
