/**
 * `infer serve` as a gateway: a local stories260K (wasm) and a remote model
 * with two llama-server replicas under one OpenAI-compatible endpoint, talked
 * to with the official `openai` client. The llama-server helpers come from
 * backend remote's test build (test-only link).
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import OpenAI from "openai";
import { runCli, waitFor } from "./helpers.js";

interface RunningServer {
  url: string;
  port: number;
  process: ChildProcess;
  kill(): Promise<void>;
  metric(name: string): Promise<number | undefined>;
}
interface LlamaServerHelpers {
  STORIES_GGUF: string;
  skipWithoutStories?: string;
  startLlamaServer(options?: { slots?: number; extra?: string[]; port?: number }): Promise<RunningServer>;
}

const helpersUrl = new URL("../../../remote/dist/test/llama-server.js", import.meta.url);
const skip = existsSync(fileURLToPath(helpersUrl)) ? undefined : `needs the build of ${fileURLToPath(helpersUrl)}`;
const PROMPT = "Once upon a time";

test("infer serve fronts a local model and a two-replica remote one; a killed replica is taken out and back in", { skip, timeout: 240_000 }, async (t) => {
  const helpers = (await import(helpersUrl.href)) as LlamaServerHelpers;
  if (helpers.skipWithoutStories) return t.skip(helpers.skipWithoutStories);
  const gguf = helpers.STORIES_GGUF;
  // --metrics lets the test see which replica did the work.
  const replicas = await Promise.all([0, 1].map(() => helpers.startLlamaServer({ slots: 1, extra: ["--metrics"] })));
  const [a, b] = replicas as [RunningServer, RunningServer];
  const started: RunningServer[] = [...replicas];
  t.after(() => Promise.all(started.map((s) => s.kill())));

  const direct = await loadModel(gguf, { backend: "wasm", threads: 1 });
  const localExpected = (await direct.generateText(PROMPT, { maxTokens: 12, temperature: 0 })).text;
  await direct.close();
  const rawRemote = await fetch(`${a.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: PROMPT, max_tokens: 12, temperature: 0 }),
  });
  const remoteExpected = ((await rawRemote.json()) as { choices: { text: string }[] }).choices[0]!.text;

  const signals = new EventEmitter();
  const served = { local: "", big: [] as string[], afterKill: [] as string[], names: [] as string[], before: [] as number[], comeback: 0 };
  const argv = ["serve", `local=${gguf}`, `big=${a.url}/v1,${b.url}/v1`, "--backend", "wasm", "--threads", "1", "--port", "0"];
  const { code, stderr } = await runCli(argv, {
    signals,
    during: async (_io, output) => {
      try {
        await waitFor(() => /serving local, big at (http:\/\/\S+)\/v1/.test(output()), "the gateway to listen", 60_000);
        const url = /serving local, big at (http:\/\/\S+)\/v1/.exec(output())![1]!;
        const openai = new OpenAI({ apiKey: "none", baseURL: `${url}/v1`, maxRetries: 0 });
        served.names = (await openai.models.list()).data.map((m) => m.id);
        const complete = async (model: string) =>
          (await openai.completions.create({ model, prompt: PROMPT, max_tokens: 12, temperature: 0 })).choices[0]!.text;
        served.local = await complete("local");
        for (let i = 0; i < 4; i++) served.big.push(await complete("big"));

        served.before = await Promise.all([a, b].map(async (r) => (await r.metric("tokens_predicted_total")) ?? 0));
        await a.kill();
        for (let i = 0; i < 4; i++) {
          const stream = await openai.completions.create({ model: "big", prompt: PROMPT, max_tokens: 12, temperature: 0, stream: true });
          let text = "";
          for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
          served.afterKill.push(text);
        }

        // The replica comes back on its port: a health check returns it to the rotation.
        const revived = await helpers.startLlamaServer({ slots: 1, extra: ["--metrics"], port: a.port });
        started.push(revived);
        const deadline = Date.now() + 30_000;
        while (Date.now() < deadline && !((await revived.metric("tokens_predicted_total")) ?? 0)) {
          await complete("big");
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
        served.comeback = (await revived.metric("tokens_predicted_total")) ?? 0;
      } finally {
        signals.emit("SIGINT");
      }
    },
  });
  assert.equal(code, 0, stderr);
  assert.deepEqual(served.names.sort(), ["big", "local"]);
  assert.equal(served.local, localExpected);
  assert.deepEqual(served.big, Array(4).fill(remoteExpected));
  // Least in flight with ties taken in turn: sequential requests reached both replicas.
  assert.ok(served.before.length === 2 && served.before.every((n) => n > 0), `both replicas served requests before the kill: ${served.before}`);
  assert.deepEqual(served.afterKill, Array(4).fill(remoteExpected), "requests kept succeeding with one replica dead");
  assert.ok(served.comeback > 0, "the revived replica got requests again");
});
