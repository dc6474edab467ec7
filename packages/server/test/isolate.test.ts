/**
 * A model isolated in a child process (LoadOptions.isolate, llama_cpp over
 * stories260K) whose process dies mid-request: that request gets a 5xx, the
 * server and the model (restarted) serve on.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { loadModel, type ProbeEvent } from "@infer/core";
import "@infer/core/node";
import OpenAI from "openai";
import { createServer } from "../src/index.js";

// The engine registers itself on import; this package does not depend on it, so it is loaded by name.
await import("@infer/llama-cpp" as string).catch(() => undefined);

const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const stories = `${models}stories260K/stories260K.gguf`;
const skip = existsSync(stories) ? false : `needs ${stories} (the shared test models are not here)`;

test("a model process killed mid-request: that request gets 502, the next ones are served", { skip, timeout: 120_000 }, async () => {
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");
  /** Tokens the model may still generate before its process is killed (undefined: never). */
  let tokensBeforeKill: number | undefined;
  const model = await loadModel(stories, {
    backend: "llama_cpp",
    threads: 1,
    contextLength: 256,
    isolate: true,
    probe: (event: ProbeEvent) => {
      if (event.kind !== "token" || tokensBeforeKill === undefined || tokensBeforeKill-- > 0) return;
      tokensBeforeKill = undefined;
      process.kill((model as unknown as { pid: number }).pid, "SIGKILL");
    },
  });
  const server = createServer({ models: { stories: model } });
  try {
    const { url } = await server.listen(0, "127.0.0.1");
    const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
    const request = { model: "stories", prompt: "", max_tokens: 200, temperature: 0 };

    tokensBeforeKill = 0;
    const failed = await openai.completions.create(request).then(
      () => assert.fail("the request whose model process died succeeded"),
      (error: unknown) => error,
    );
    assert.ok(failed instanceof OpenAI.APIError, String(failed));
    assert.equal(failed.status, 502);
    assert.equal(failed.code, "backend_crashed");
    assert.match(failed.message, /SIGKILL/);

    const whole = await openai.completions.create(request);
    assert.equal(whole.choices[0]!.text, expected);

    // A stream that has started gets the crash as its last event.
    tokensBeforeKill = 5;
    let streamed = "";
    await assert.rejects(async () => {
      for await (const chunk of await openai.completions.create({ ...request, stream: true })) streamed += chunk.choices[0]?.text ?? "";
    }, /backend_crashed|died/);
    assert.ok(streamed.length > 0 && expected.startsWith(streamed), JSON.stringify(streamed));

    assert.equal((await fetch(`${url}/health`)).status, 200);
    const again = await openai.completions.create({ ...request, max_tokens: 20 });
    assert.ok(again.choices[0]!.text.length > 20 && expected.startsWith(again.choices[0]!.text));
  } finally {
    await server.close();
    await model.close();
  }
});
