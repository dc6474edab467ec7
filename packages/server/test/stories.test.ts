import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { loadModel, listBackends } from "@infer/core";
import "@infer/core/node";
import OpenAI from "openai";
import { createServer } from "../src/index.js";
import { PLAIN_CHAT_TEMPLATE } from "@infer/core/testing";

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const gguf = `${models}stories260K/stories260K.gguf`;
const skip = existsSync(gguf) ? false : `needs ${gguf} (the shared test models are not here)`;

test("OpenAI text completion over stories260K gives llama2.c's greedy text, streamed and not", { skip, timeout: 120_000 }, async () => {
  // The engines register themselves on import; this package does not depend on them, so load them by name.
  for (const name of ["@infer/llama-cpp", "@infer/wasm"]) await import(name).catch(() => undefined);
  assert.ok(listBackends().length > 0, "no backend package could be imported");
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");
  const model = await loadModel(gguf, { threads: 1 });
  const server = createServer({ models: { stories: model } });
  try {
    const { url } = await server.listen(0, "127.0.0.1");
    const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
    const whole = await openai.completions.create({ model: "stories", prompt: "", max_tokens: 200, temperature: 0 });
    assert.equal(whole.choices[0]!.text, expected);
    assert.equal(whole.choices[0]!.finish_reason, "length");
    assert.equal(whole.usage?.completion_tokens, 200);
    const stream = await openai.completions.create({ model: "stories", prompt: "", max_tokens: 200, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    assert.equal(text, expected);
    // Requests waiting together are decoded in one batch, and greedy batch decoding gives the same text.
    const together = await Promise.all(
      [0, 1, 2].map(() => openai.completions.create({ model: "stories", prompt: "", max_tokens: 60, temperature: 0 })),
    );
    for (const answer of together) assert.ok(answer.choices[0]!.text.length > 60 && expected.startsWith(answer.choices[0]!.text));
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^infer_batched_requests_total\{model="stories"\} 5$/m, "1 + 1 (streamed) + 3 requests through batchGenerate");
  } finally {
    await server.close();
    await model.close();
  }
});

test("logprobs of stories260K's greedy text through the wasm backend", { skip, timeout: 60_000 }, async () => {
  await import("@infer/wasm" as string);
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
  const model = await loadModel(gguf, { backend: "wasm", threads: 1 });
  const server = createServer({ models: { stories: model } });
  try {
    const { url } = await server.listen(0, "127.0.0.1");
    const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
    const scored = await openai.completions.create({ model: "stories", prompt: "", max_tokens: 30, temperature: 0, logprobs: 5 });
    const { text } = scored.choices[0]!;
    const logprobs = scored.choices[0]!.logprobs!;
    assert.ok(text.length > 30 && expected.startsWith(text));
    assert.equal(logprobs.tokens!.join(""), text);
    // A trained vocabulary spells each greedy token like its likeliest alternative
    // (but the first, whose leading space SentencePiece decoding drops).
    logprobs.tokens!.forEach((token, i) => {
      const [best, bestLogprob] = Object.entries(logprobs.top_logprobs![i]!)[0]!;
      assert.equal(i === 0 ? best.trimStart() : best, token);
      assert.equal(logprobs.token_logprobs![i], bestLogprob);
      assert.ok(bestLogprob <= 0);
    });
  } finally {
    await server.close();
    await model.close();
  }
});

for (const backend of ["wasm", "llama_cpp"]) {
  test(`a chat's second turn through the server reuses the first's prompt tokens (${backend})`, { skip, timeout: 60_000 }, async () => {
    await import(backend === "wasm" ? "@infer/wasm" : ("@infer/llama-cpp" as string));
    const model = await loadModel(gguf, { backend, threads: 1, contextLength: 256 });
    const server = createServer({ models: { stories: model }, chatTemplates: { stories: PLAIN_CHAT_TEMPLATE } });
    try {
      const { url } = await server.listen(0, "127.0.0.1");
      const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
      const ask = (messages: OpenAI.Chat.ChatCompletionMessageParam[]) =>
        openai.chat.completions.create({ model: "stories", messages, max_tokens: 12, temperature: 0 });
      const first: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Tom had a red ball." }];
      const reused = async () => {
        const text = await (await fetch(`${url}/metrics`)).text();
        return Number(/^infer_prompt_cached_tokens_total\{model="stories"\} (\d+)$/m.exec(text)?.[1] ?? "NaN");
      };
      const one = await ask(first);
      assert.equal(one.usage?.prompt_tokens_details?.cached_tokens, 0);
      assert.equal(await reused(), 0);
      const two = await ask([...first, { role: "assistant", content: one.choices[0]!.message.content ?? "" }, { role: "user", content: "Where did it go?" }]);
      const cached = two.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      // The second prompt repeats all of the first: evaluated are only its new tokens.
      assert.ok(cached >= one.usage!.prompt_tokens, `${cached} of ${two.usage?.prompt_tokens} prompt tokens reused`);
      assert.equal(await reused(), cached, "/metrics counts the reused prompt tokens the response reported");
    } finally {
      await server.close();
      await model.close();
    }
  });
}
