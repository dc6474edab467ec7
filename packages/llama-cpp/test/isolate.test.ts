import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  capabilitiesOf,
  capabilityMismatches,
  isInferenceError,
  isTokenizerModel,
  loadModel,
  type ProbeEvent,
  type Token,
} from "@infer/core";
import { IsolatedLlamaCppModel, type LlamaCppModel, llamaCppBackend } from "../src/index.js";
import { rejectsWith, skipWithoutStories, STORIES_EXPECTED, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

const ISOLATED = { ...TEST_LOAD, isolate: true } as const;
const GREEDY = { temperature: 0 } as const;
const PROMPTS = ["Once upon a time", "The dog", "Lily and Ben", "One day, a little"];

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Collects a stream, sending `signal` to the child process after `after` tokens. */
async function killMidStream(model: IsolatedLlamaCppModel, stream: AsyncIterable<Token>, signal: NodeJS.Signals, after = 3) {
  const tokens: Token[] = [];
  for await (const token of stream) {
    tokens.push(token);
    if (tokens.length === after) process.kill(model.pid!, signal);
  }
  return tokens;
}

describe("llama_cpp isolated in a child process (stories260K)", { skip: skipWithoutStories }, () => {
  let model: IsolatedLlamaCppModel;
  let reference: LlamaCppModel;
  const events: ProbeEvent[] = [];

  before(async () => {
    model = (await loadModel(STORIES_GGUF, { ...ISOLATED, probe: (event) => events.push(event) })) as IsolatedLlamaCppModel;
    reference = (await loadModel(STORIES_GGUF, TEST_LOAD)) as LlamaCppModel;
  });
  after(async () => {
    await model?.close();
    await reference?.close();
  });

  test("it runs in another process and reports what it lacks: a synchronous tokenizer", () => {
    assert.ok(model instanceof IsolatedLlamaCppModel);
    assert.ok(model.pid !== undefined && model.pid !== process.pid && isRunning(model.pid));
    assert.equal(model.path, STORIES_GGUF);
    assert.deepEqual(model.info(), reference.info());
    assert.equal(isTokenizerModel(model), false);
    const report = capabilitiesOf(model);
    assert.equal(report.tokenizer, "unsupported");
    assert.equal(report["chat.template"], "unsupported");
    assert.equal(report.embeddings, "supported");
    assert.equal(report.grammar, "supported");
    assert.deepEqual(capabilityMismatches(llamaCppBackend, model), []);
  });

  test("greedy 200 tokens from BOS equal llama2.c's published output", async () => {
    const expected = readFileSync(STORIES_EXPECTED, "utf8").replace(/\n$/, "");
    const result = await model.generateText("", { ...GREEDY, maxTokens: 200 });
    assert.equal(result.text, expected);
    assert.equal(result.tokens.length, 200);
    assert.equal(result.finishReason, "length");
    assert.equal(result.metrics.promptTokens, 1);
    assert.equal(result.metrics.generatedTokens, 200);
    assert.ok(result.metrics.activeMemoryBytes > 1_000_000, "the child's memory is reported");
  });

  test("a stop string ends the stream where it does in process, and the child decoded no further", async () => {
    const options = { ...GREEDY, maxTokens: 80, stopStrings: ["."] };
    const isolated = await model.generateText("Once upon a time", options);
    const inProcess = await reference.generateText("Once upon a time", options);
    assert.equal(isolated.text, inProcess.text);
    assert.equal(isolated.finishReason, "stop");
    assert.equal(isolated.metrics.generatedTokens, inProcess.metrics.generatedTokens);
  });

  test("probe events come back from the child: each token, then the call's memory", async () => {
    events.length = 0;
    const result = await model.generateText("Once", { ...GREEDY, maxTokens: 5 });
    const tokens = events.filter((e) => e.kind === "token");
    assert.deepEqual(
      tokens.map((e) => (e.kind === "token" ? e.payload.id : -1)),
      result.tokens.map((t) => t.id),
    );
    assert.equal(events.at(-1)?.kind, "memory");
  });

  test("batchGenerate equals the in-process batch, per-prompt stop strings included", async () => {
    const options = { ...GREEDY, maxTokens: 40, promptStopStrings: [["."], undefined, [","], undefined] };
    const seen: number[] = [];
    const isolated = await model.batchGenerate(PROMPTS, { ...options, onToken: (index) => seen.push(index) });
    const inProcess = await reference.batchGenerate(PROMPTS, options);
    assert.deepEqual(
      isolated.map((r) => [r.text, r.finishReason]),
      inProcess.map((r) => [r.text, r.finishReason]),
    );
    assert.equal(seen.length, isolated.reduce((sum, r) => sum + r.tokens.length, 0));
  });

  test("classify, chat and embed are served by the child", async () => {
    const [isolated] = await model.classify(["Once upon a time"], { logits: true });
    const [inProcess] = await reference.classify(["Once upon a time"], { logits: true });
    assert.deepEqual(isolated!.token, inProcess!.token);
    assert.ok(isolated!.logits instanceof Float32Array);
    assert.deepEqual(isolated!.logits, inProcess!.logits);
    const chatTemplate = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
    const messages = [{ role: "user" as const, content: "Once upon a time" }];
    assert.equal(
      (await model.chatText(messages, { ...GREEDY, maxTokens: 12, chatTemplate })).text,
      (await reference.chatText(messages, { ...GREEDY, maxTokens: 12, chatTemplate })).text,
    );
    await assert.rejects(model.chatText(messages, { maxTokens: 4 }), rejectsWith("NO_CHAT_TEMPLATE"));
    const [vector] = await model.embed(["Once upon a time"]);
    assert.deepEqual(vector, (await reference.embed(["Once upon a time"]))[0]);
  });

  test("embed does not wait for a stream in progress (as in process)", async () => {
    const stream = model.generate("Once upon a time", { ...GREEDY, maxTokens: 50 })[Symbol.asyncIterator]();
    try {
      assert.equal((await stream.next()).done, false);
      const [vector] = await model.embed(["The dog"]);
      assert.deepEqual(vector, (await reference.embed(["The dog"]))[0]);
      assert.equal((await stream.next()).done, false);
    } finally {
      await stream.return?.(undefined);
    }
  });

  test("an abort ends the stream with ABORTED, and the model serves the next call", async () => {
    const controller = new AbortController();
    const tokens: Token[] = [];
    await assert.rejects(
      (async () => {
        for await (const token of model.generate("Once upon a time", { ...GREEDY, maxTokens: 100, signal: controller.signal })) {
          tokens.push(token);
          if (tokens.length === 3) controller.abort();
        }
      })(),
      rejectsWith("ABORTED"),
    );
    assert.equal(tokens.length, 3);
    const aborted = new AbortController();
    aborted.abort();
    const batch = await model.batchGenerate(PROMPTS, { ...GREEDY, maxTokens: 10, signal: aborted.signal });
    assert.deepEqual(
      batch.map((r) => r.finishReason),
      PROMPTS.map(() => "abort"),
    );
    const next = await model.generateText("The dog", { ...GREEDY, maxTokens: 10 });
    assert.equal(next.text, (await reference.generateText("The dog", { ...GREEDY, maxTokens: 10 })).text);
  });

  test("a child killed mid-stream fails that stream with BACKEND_CRASHED; the next call restarts it", async () => {
    const killed = model.pid!;
    await assert.rejects(
      killMidStream(model, model.generate("Once upon a time", { ...GREEDY, maxTokens: 100 }), "SIGKILL"),
      rejectsWith("BACKEND_CRASHED", STORIES_GGUF, "SIGKILL"),
    );
    assert.ok(isInferenceError(model.err(), "BACKEND_CRASHED"));
    assert.equal(model.pid, undefined);
    const expected = await reference.generateText("Once upon a time", { ...GREEDY, maxTokens: 20 });
    const again = await model.generateText("Once upon a time", { ...GREEDY, maxTokens: 20 });
    assert.equal(again.text, expected.text);
    assert.ok(model.pid !== undefined && model.pid !== killed);
  });

  test("a native abort (SIGABRT) mid-batch fails the batch with BACKEND_CRASHED; the next call restarts it", async () => {
    let tokens = 0;
    await assert.rejects(
      model.batchGenerate(PROMPTS, {
        ...GREEDY,
        maxTokens: 100,
        onToken: () => {
          if (++tokens === 5) process.kill(model.pid!, "SIGABRT");
        },
      }),
      rejectsWith("BACKEND_CRASHED", "SIGABRT"),
    );
    const batch = await model.batchGenerate(PROMPTS, { ...GREEDY, maxTokens: 10 });
    assert.deepEqual(
      batch.map((r) => r.text),
      (await reference.batchGenerate(PROMPTS, { ...GREEDY, maxTokens: 10 })).map((r) => r.text),
    );
  });

  test("close() ends the child process; later calls are CLOSED", async () => {
    const pid = model.pid!;
    await model.close();
    assert.equal(isRunning(pid), false);
    await assert.rejects(model.generateText("Once"), rejectsWith("CLOSED"));
  });
});

describe("isolated loads that fail", { skip: skipWithoutStories }, () => {
  let scratch: string;
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "infer-llama-cpp-isolate-"));
  });

  test("a truncated model file is MODEL_FORMAT from the child, naming the file", async () => {
    const path = join(scratch, "truncated.gguf");
    const whole = await readFile(STORIES_GGUF);
    await writeFile(path, whole.subarray(0, Math.floor(whole.length / 2)));
    await assert.rejects(loadModel(path, ISOLATED), rejectsWith("MODEL_FORMAT", path));
  });

  test("options llama_cpp refuses are refused from the child with the same code", async () => {
    await assert.rejects(loadModel(STORIES_GGUF, { ...ISOLATED, quantize: "q8_0" }), rejectsWith("UNSUPPORTED", "quantize"));
  });

  test(
    "three crashes in a row while loading stop the restarts: later calls fail at once",
    { skip: process.platform === "linux" ? false : "finds the child process through /proc (Linux only)" },
    async () => {
      const model = (await loadModel(STORIES_GGUF, ISOLATED)) as IsolatedLlamaCppModel;
      try {
        const seen = new Set([model.pid!]);
        process.kill(model.pid!, "SIGKILL");
        await until(() => model.pid === undefined);
        for (let crash = 0; crash < 3; crash++) {
          const call = model.generateText("Once", { maxTokens: 2 });
          const child = await newChild(seen);
          process.kill(child, "SIGKILL");
          await assert.rejects(call, rejectsWith("BACKEND_CRASHED", "while loading"));
        }
        await assert.rejects(model.generateText("Once", { maxTokens: 2 }), rejectsWith("BACKEND_CRASHED", "3 times in a row"));
        assert.equal(childrenOfThisProcess().filter((pid) => !seen.has(pid)).length, 0, "no fourth process was started");
      } finally {
        await model.close();
      }
    },
  );
});

/** Waits for a child process of this one running isolate-child.js that is not in `seen` (and adds it). */
async function newChild(seen: Set<number>): Promise<number> {
  let fresh: number | undefined;
  await until(() => (fresh = childrenOfThisProcess().find((pid) => !seen.has(pid))) !== undefined);
  seen.add(fresh!);
  return fresh!;
}

/** Polls `condition` until it holds; fails after 30 s rather than hang the suite. */
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for: ${condition.toString()}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function childrenOfThisProcess(): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (parent === process.pid && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("isolate-child.js")) children.push(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return children;
}
