import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { COMMANDS } from "../src/index.js";
import { ANSWER, FakeModel, fakeBehaviour, runCli, tinyHub, waitFor } from "./helpers.js";

const TEXT = ANSWER.join("");
let dir: string;
let modelPath: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "infer-cli-"));
  modelPath = join(dir, "story.fake");
  await writeFile(modelPath, "fake weights");
});
after(() => rm(dir, { recursive: true, force: true }));

describe("help and errors", () => {
  test("every command has --help", async () => {
    for (const command of COMMANDS) {
      const { code, stdout } = await runCli([command.name, "--help"]);
      assert.equal(code, 0, command.name);
      assert.match(stdout, new RegExp(`^Usage: infer ${command.name}`), command.name);
      assert.match(stdout, /--verbose/);
    }
    const top = await runCli(["--help"]);
    assert.equal(top.code, 0);
    for (const command of COMMANDS) assert.match(top.stdout, new RegExp(`^  ${command.name} `, "m"));
  });

  test("usage errors exit 2 with one line naming the code and the help", async () => {
    for (const argv of [["frobnicate"], ["run", "--bogus", "x"], ["run", modelPath, "--max-tokens", "many"], ["run"]]) {
      const { code, stderr, stdout } = await runCli(argv);
      assert.equal(code, 2, argv.join(" "));
      assert.equal(stdout, "");
      assert.match(stderr, /^infer: error INVALID_OPTION: .*--help`\n$/, argv.join(" "));
    }
  });

  test("a missing model is one line with MODEL_NOT_FOUND; --verbose adds the stack", async () => {
    const plain = await runCli(["run", join(dir, "none.gguf"), "hi"]);
    assert.equal(plain.code, 1);
    assert.match(plain.stderr, /^infer: error MODEL_NOT_FOUND: no model at '.*none\.gguf'.*\n$/);
    assert.equal(plain.stderr.split("\n").length, 2);
    const verbose = await runCli(["run", join(dir, "none.gguf"), "hi", "--verbose"]);
    assert.match(verbose.stderr, /\n {4}at /);
  });
});

describe("run", () => {
  test("streams only the generated text, then a newline, and forwards the flags", async () => {
    const { code, stdout, stderr } = await runCli([
      "run", modelPath, "Hello", "--backend", "fake", "--max-tokens", "3", "--temperature", "0", "--top-k", "5",
      "--top-p", "0.9", "--min-p", "0.1", "--repeat-penalty", "1.1", "--seed", "42", "--stop", "zzz", "--stop", "yyy",
    ]);
    assert.equal(code, 0, stderr);
    assert.equal(stdout, "Once upon a\n");
    assert.equal(stderr, "");
    const model = FakeModel.last!;
    assert.deepEqual(model.prompts, ["Hello"]);
    const o = model.options[0]!;
    assert.deepEqual([o.maxTokens, o.temperature, o.topK, o.topP, o.minP, o.repeatPenalty, o.seed], [3, 0, 5, 0.9, 0.1, 1.1, 42]);
    assert.deepEqual(o.stopStrings, ["zzz", "yyy"]);
  });

  test("reads the prompt from stdin when none is given", async () => {
    const { code, stdout } = await runCli(["run", modelPath, "--backend", "fake"], { stdin: "from stdin" });
    assert.equal(code, 0);
    assert.equal(stdout, `${TEXT}\n`);
    assert.deepEqual(FakeModel.last!.prompts, ["from stdin"]);
  });

  test("--chat and --system render the chat template", async () => {
    await runCli(["run", modelPath, "Hi", "--backend", "fake", "--system", "Be brief."]);
    assert.deepEqual(FakeModel.last!.prompts, ["<system>Be brief.<user>Hi<assistant>"]);
    await runCli(["run", modelPath, "Hi", "--backend", "fake", "--chat"]);
    assert.deepEqual(FakeModel.last!.prompts, ["<user>Hi<assistant>"]);
  });

  test("--chat-template takes a file or the template text", async () => {
    await runCli(["run", modelPath, "Hi", "--backend", "fake", "--chat", "--chat-template", "{{ messages[0].content }}"]);
    assert.equal(FakeModel.last!.options[0]!.chatTemplate, "{{ messages[0].content }}");
    const file = join(dir, "template.jinja");
    await writeFile(file, "{% for m in messages %}{{ m.content }}{% endfor %}");
    await runCli(["chat", modelPath, "--backend", "fake", "--chat-template", file], { stdin: "hi\n" });
    assert.equal(FakeModel.last!.options[0]!.chatTemplate, "{% for m in messages %}{{ m.content }}{% endfor %}");
  });

  test("--json prints one result with text, finish reason and metrics", async () => {
    const { code, stdout } = await runCli(["run", modelPath, "x", "--backend", "fake", "--json", "-n", "2"]);
    assert.equal(code, 0);
    const result = JSON.parse(stdout);
    assert.equal(result.text, "Once upon");
    assert.equal(result.finishReason, "length");
    assert.equal(result.metrics.generatedTokens, 2);
    assert.equal(result.backend, "fake");
  });

  test("Ctrl-C stops the generation and exits 130", async () => {
    fakeBehaviour.delayMs = 20;
    fakeBehaviour.answer = Array(200).fill(" la");
    try {
      const signals = new EventEmitter();
      const { code, stdout } = await runCli(["run", modelPath, "x", "--backend", "fake"], {
        signals,
        during: async (_io, output) => {
          await waitFor(() => output().includes(" la la"), "some output");
          signals.emit("SIGINT");
        },
      });
      assert.equal(code, 130);
      assert.ok(stdout.length < 200 * 3, "stopped early");
      assert.equal(FakeModel.last!.aborts, 1);
    } finally {
      fakeBehaviour.delayMs = 0;
      fakeBehaviour.answer = ANSWER;
    }
  });
});

describe("chat", () => {
  test("keeps history, /reset forgets it, /exit leaves", async () => {
    const { code, stdout } = await runCli(["chat", modelPath, "--backend", "fake"], { stdin: "hello\nmore\n/reset\nagain\n/exit\nignored\n" });
    assert.equal(code, 0);
    assert.equal(stdout, `${TEXT}\n`.repeat(3));
    assert.deepEqual(FakeModel.last!.prompts, [
      "<user>hello<assistant>",
      `<user>hello<assistant>${TEXT}<user>more<assistant>`,
      "<user>again<assistant>",
    ]);
  });

  test("Ctrl-C stops the current answer, not the program", async () => {
    fakeBehaviour.delayMs = 20;
    fakeBehaviour.answer = Array(100).fill(" la");
    const signals = new EventEmitter();
    try {
      const stdin = new PassThrough();
      const io = runCli(["chat", modelPath, "--backend", "fake"], {
        signals,
        stdin,
        during: async (_io, output) => {
          stdin.write("tell me\n");
          await waitFor(() => output().includes(" la la"), "an answer to start");
          signals.emit("SIGINT");
          await waitFor(() => output().includes("(answer stopped)"), "the answer to stop");
          fakeBehaviour.delayMs = 0;
          fakeBehaviour.answer = ANSWER;
          stdin.end("next\n");
        },
      });
      const { code, stdout } = await io;
      assert.equal(code, 0);
      assert.ok(stdout.endsWith(`\n${TEXT}\n`), stdout);
      assert.equal(FakeModel.last!.aborts, 1);
      assert.equal(FakeModel.last!.prompts.length, 2);
    } finally {
      fakeBehaviour.delayMs = 0;
      fakeBehaviour.answer = ANSWER;
    }
  });
});

describe("serve, bench, info", () => {
  test("serve answers OpenAI requests until SIGINT", async () => {
    const signals = new EventEmitter();
    let answer: unknown;
    const { code, stderr } = await runCli(["serve", `tiny=${modelPath}`, "--backend", "fake", "--port", "0", "--api-key", "k"], {
      signals,
      during: async (_io, output) => {
        await waitFor(() => /serving tiny at (http:\/\/\S+)\/v1/.test(output()), "the server to listen");
        const url = /serving tiny at (http:\/\/\S+)\/v1/.exec(output())![1]!;
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: "Bearer k", "content-type": "application/json" },
          body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "hi" }] }),
        });
        answer = await res.json();
        signals.emit("SIGINT");
      },
    });
    assert.equal(code, 0, stderr);
    assert.equal((answer as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, TEXT);
  });

  test("bench --json reports load, first token, prefill and decode rates, memory", async () => {
    const { code, stdout } = await runCli(["bench", modelPath, "--backend", "fake", "--json", "--runs", "2", "-n", "4"]);
    assert.equal(code, 0);
    const report = JSON.parse(stdout);
    assert.equal(report.runs.length, 2);
    assert.equal(report.runs[0].generatedTokens, 4);
    assert.ok(report.loadMs >= 0 && report.timeToFirstTokenMs >= 0);
    // The fake reports 3 prompt tokens in 1 ms and 4 tokens (3 after the first) in 2 ms.
    assert.equal(report.prefillTokensPerSec, 3000);
    assert.equal(report.decodeTokensPerSec, 1500);
    assert.ok(report.peakRssBytes > 0);
  });

  test("info prints the metadata table", async () => {
    const { code, stdout } = await runCli(["info", modelPath, "--backend", "fake"]);
    assert.equal(code, 0);
    assert.match(stdout, /^architecture\s+fake$/m);
    assert.match(stdout, /^context length\s+128$/m);
    assert.match(stdout, /^capabilities\s+generate, chat, classify, batch\.generate$/m);
  });
});

describe("pull, ls, rm against a local hub", () => {
  test("pull prints the path and progress, ls lists it, rm deletes it", async () => {
    const weights = Buffer.alloc(64 * 1024, 7);
    weights.write("GGUF", 0, "latin1");
    const hub = await tinyHub("org/tiny-GGUF", "tiny-Q8_0.gguf", weights);
    const env = { INFER_CACHE: join(dir, "cache"), HF_ENDPOINT: hub.url };
    try {
      const pulled = await runCli(["pull", "hf:org/tiny-GGUF"], { env });
      assert.equal(pulled.code, 0, pulled.stderr);
      const path = pulled.stdout.trim();
      assert.ok((await readFile(path)).equals(weights));
      assert.match(pulled.stderr, /tiny-Q8_0\.gguf \[#{24}\] 100% 64\.0 KiB\/64\.0 KiB .*\/s ETA/);
      assert.match(pulled.stderr, /sha256 verified/);
      const again = await runCli(["pull", "hf:org/tiny-GGUF"], { env });
      assert.match(again.stderr, /already in the cache/);

      const listed = await runCli(["ls"], { env });
      assert.match(listed.stdout, /^NAME\s+FORMAT\s+ARCH\s+QUANT\s+SIZE\s+PATH$/m);
      assert.match(listed.stdout, /^hf:org\/tiny-GGUF:tiny-Q8_0\.gguf\s+gguf\s+/m);

      const removed = await runCli(["rm", "hf:org/tiny-GGUF"], { env });
      assert.equal(removed.code, 0);
      assert.equal((await runCli(["ls", "--json"], { env })).stdout, "[]\n");
    } finally {
      hub.server.close();
    }
  });
});
