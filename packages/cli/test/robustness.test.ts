import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { EventEmitter } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { listBackends } from "@infer/core";
import { registerBackends } from "../src/backends.js";
import { runCli, waitFor } from "./helpers.js";

let dir: string;
let fake: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "infer-cli-robust-"));
  fake = join(dir, "story.fake");
  await writeFile(fake, "fake weights");
});
after(() => rm(dir, { recursive: true, force: true }));

describe("exit codes: 2 for a bad command line, 1 for a failure while working", () => {
  test("a negative number after a flag is its value, refused with the flag's range", async () => {
    for (const [flag, value] of [["-n", "-1"], ["--max-tokens", "-5"], ["--temperature", "-0.5"], ["--seed", "-3"], ["--top-k", "-1"]] as const) {
      const { code, stderr } = await runCli(["run", fake, "hi", "--backend", "fake", flag, value]);
      assert.equal(code, 2, `${flag} ${value}: ${stderr}`);
      assert.doesNotMatch(stderr, /ambiguous/);
      assert.match(stderr, new RegExp(`^infer: error INVALID_OPTION: --[a-z-]+: .*must be .*\\(got ${value.replace(".", "\\.")}\\)`), stderr);
    }
    assert.match((await runCli(["run", fake, "hi", "--backend", "fake", "-n", "-1"])).stderr, /--max-tokens: .*'maxTokens' must be an integer >= 1/);
  });

  test("a flag value out of range is a usage error whichever command reads it", async () => {
    const usage = [
      ["run", fake, "hi", "--backend", "fake", "--context", "0"],
      ["run", fake, "hi", "--backend", "fake", "--top-p", "5"],
      ["chat", fake, "--backend", "fake", "--temperature", "x"],
      ["chat", fake, "--backend", "fake", "--chat-template="],
      ["info", fake, "--backend", "fake", "--threads", "0"],
      ["bench", fake, "--backend", "fake", "--runs", "0"],
      ["serve", fake, "--backend", "fake", "--port", "99999"],
      ["serve", fake, "--backend", "fake", "--parallel", "0"],
      ["serve", fake, "--backend", "fake", "--max-batch", "-2"],
      ["serve", fake, "--backend", "fake", "--max-loaded-mb", "-1"],
      ["serve", fake, "--backend", "fake", "--idle-unload", "x"],
      ["serve", "http://127.0.0.1:1/v1,http://127.0.0.1:2/v1"],
      ["convert", dir],
      ["ls", "--dir"],
      ["pull"],
      ["rm", "a", "b"],
    ];
    for (const argv of usage) {
      const { code, stderr } = await runCli(argv);
      assert.equal(code, 2, `${argv.join(" ")}: ${stderr}`);
      assert.match(stderr, /^infer: error INVALID_OPTION: .*see `infer \w+ --help`\n$/, argv.join(" "));
    }
    for (const argv of [["run", join(dir, "none.gguf"), "hi"], ["info", join(dir, "none.gguf")], ["convert", join(dir, "none"), join(dir, "x.gguf")]]) {
      assert.equal((await runCli(argv)).code, 1, argv.join(" "));
    }
  });
});

test("convert into a folder that does not exist: IO naming the path, before any work", async () => {
  const out = join(dir, "missing-folder", "out.gguf");
  // Not even a model folder: the destination is checked first, since converting holds the model in memory.
  const { code, stderr } = await runCli(["convert", dir, out]);
  assert.equal(code, 1);
  assert.match(stderr, /^infer: error IO: cannot write .*missing-folder.out\.gguf: .*ENOENT\n$/);
  assert.doesNotMatch(stderr, /report|INTERNAL/);
});

test("npx infer in the repository: no npm config warning, just the version", (t) => {
  const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));
  const result = spawnSync("npx", ["--no-install", "infer", "--version"], { cwd: repoRoot, encoding: "utf8" });
  if (result.error) return t.skip(`npx is not runnable here: ${result.error.message}`);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout, "infer 0.1.0\n");
  // The root .npmrc once held node-llama-cpp's own setting, which npm flags on every run.
  assert.doesNotMatch(result.stderr, /Unknown (project|user|global|builtin) config/);
});

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
const gguf = fileURLToPath(new URL("../../../../../shared/models/stories260K/stories260K.gguf", import.meta.url));
const noModel = existsSync(gguf) ? false : `needs ${gguf} (the shared test models are not here)`;
const TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}";

describe("a model without a chat template (stories260K)", { skip: noModel }, () => {
  for (const backend of ["wasm", "llama_cpp"]) {
    test(`infer chat --backend ${backend} fails at start, suggesting --chat-template; with one it answers`, async (t) => {
      await registerBackends();
      if (!listBackends().includes(backend)) return t.skip(`backend ${backend} is not installed or failed to load`);
      // No input at all: the refusal must come from opening the model, not from a first message.
      const refused = await runCli(["chat", gguf, "--backend", backend, "--threads", "1"]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /^infer: error NO_CHAT_TEMPLATE: .*stories260K\.gguf has no chat template.*--chat-template <file\|text>\)\n$/);
      assert.doesNotMatch(refused.stderr, /infer run/);
      const file = join(dir, "template.jinja");
      await writeFile(file, TEMPLATE);
      for (const template of [file, TEMPLATE]) {
        const answered = await runCli(["chat", gguf, "--backend", backend, "--threads", "1", "-n", "4", "-t", "0", "--chat-template", template], {
          stdin: "Once upon a time\n",
        });
        assert.equal(answered.code, 0, answered.stderr);
        assert.ok(answered.stdout.trim().length > 0, "an answer was printed");
      }
    });
  }

  test("--context beyond the trained length: a warning on stderr, and the text", async () => {
    const { code, stdout, stderr } = await runCli(["run", gguf, "Once upon a time", "--backend", "wasm", "--threads", "1", "-n", "3", "-t", "0", "--context", "4096"]);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /^infer: warning: contextLength 4096 is beyond the 2048 tokens the model was trained for/);
    assert.ok(stdout.trim().length > 0);
  });

  test("infer run --chat says the plain-text way out; infer serve --chat-template serves chat", async () => {
    const run = await runCli(["run", gguf, "hi", "--chat", "--backend", "wasm"]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /NO_CHAT_TEMPLATE: .*without --chat and --system/);
    const signals = new EventEmitter();
    let status = 0;
    let content = "";
    const served = await runCli(["serve", `tiny=${gguf}`, "--backend", "wasm", "--threads", "1", "--port", "0", "--chat-template", TEMPLATE], {
      signals,
      during: async (_io, output) => {
        await waitFor(() => /serving tiny at (http:\/\/\S+)\/v1/.test(output()), "the server to listen", 30_000);
        const url = /serving tiny at (http:\/\/\S+)\/v1/.exec(output())![1]!;
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4, temperature: 0 }),
        });
        status = res.status;
        content = ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
        signals.emit("SIGINT");
      },
    });
    assert.equal(served.code, 0, served.stderr);
    assert.equal(status, 200);
    assert.ok(content.length > 0);
  });
});
