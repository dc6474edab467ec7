import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { createServer } from "node:net";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { runCli, waitFor } from "./helpers.js";

let dir: string;
let gguf: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "infer-web-cli-"));
  // `infer web` only serves the file; the magic is what it checks.
  gguf = join(dir, "tiny.gguf");
  await writeFile(gguf, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(60, 7)]));
  await writeFile(join(dir, "notes.txt"), "not a model");
  await mkdir(join(dir, "folder"));
});
after(() => rm(dir, { recursive: true, force: true }));

describe("infer web", () => {
  test("serves the app and its models until SIGINT", async () => {
    const signals = new EventEmitter();
    const { code, stderr } = await runCli(["web", gguf, "--port", "0", "--host", "127.0.0.1"], {
      signals,
      during: async (_io, output) => {
        await waitFor(() => /web chat at (http:\/\/\S+)/.test(output()), "the server to listen");
        const url = /web chat at (http:\/\/\S+)/.exec(output())![1]!;
        const page = await fetch(url);
        assert.equal(page.headers.get("cross-origin-embedder-policy"), "require-corp");
        assert.match(await page.text(), /infer chat/);
        const { models } = (await (await fetch(new URL("models.json", url))).json()) as { models: Array<{ name: string; url: string }> };
        assert.deepEqual(models.map((m) => m.name), ["tiny.gguf"]);
        const part = await fetch(new URL(models[0]!.url, url), { headers: { range: "bytes=0-3" } });
        assert.equal(part.status, 206);
        assert.equal(await part.text(), "GGUF");
        signals.emit("SIGINT");
      },
    });
    assert.equal(code, 0, stderr);
    assert.match(stderr, /with tiny\.gguf/);
    assert.match(stderr, /shutting down/);
  });

  test("bad flags and paths are usage or model errors naming them, before anything listens", async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [["web", "--port", "http"], 2, /INVALID_OPTION: --port must be an integer in \[0, 65535\] \(got "http"\)/],
      [["web", "--port", "70000"], 2, /INVALID_OPTION: --port must be an integer/],
      [["web", "--port", "-1"], 2, /INVALID_OPTION: --port must be an integer/],
      [["web", "--colour"], 2, /INVALID_OPTION: Unknown option '--colour'; see `infer web --help`/],
      [["web", join(dir, "missing.gguf"), "--port", "0"], 1, /MODEL_NOT_FOUND: no model at '.*missing\.gguf'/],
      [["web", join(dir, "notes.txt"), "--port", "0"], 1, /MODEL_FORMAT: '.*notes\.txt' is not a GGUF file \(no GGUF magic\)/],
      [["web", join(dir, "folder"), "--port", "0"], 1, /MODEL_FORMAT: '.*folder' is not a GGUF file/],
    ];
    for (const [argv, code, message] of cases) {
      const result = await runCli(argv);
      assert.equal(result.code, code, argv.join(" "));
      assert.match(result.stderr, message, argv.join(" "));
      assert.doesNotMatch(result.stderr, /web chat at/);
    }
  });

  test("a port in use is a usage error naming it", async () => {
    const taken = createServer();
    await new Promise<void>((ok) => taken.listen(0, "127.0.0.1", ok));
    const port = (taken.address() as { port: number }).port;
    try {
      const { code, stderr } = await runCli(["web", gguf, "--port", String(port)]);
      assert.equal(code, 2);
      assert.match(stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)`));
    } finally {
      taken.close();
    }
  });
});
