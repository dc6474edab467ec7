import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { serveWebApp, type WebServer } from "../src/index.js";

let dir: string;
let server: WebServer;
const model = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

/** A raw GET, so that paths like /../x reach the server as written (fetch would normalize them). */
function rawGet(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(url), { path, method: "GET" }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "infer-web-"));
  await mkdir(join(dir, "a"));
  await writeFile(join(dir, "a", "tiny model.gguf"), model);
  await writeFile(join(dir, "tiny model.gguf"), "another file of the same name");
  server = await serveWebApp({ models: [join(dir, "a", "tiny model.gguf"), join(dir, "tiny model.gguf")], port: 0 });
});
after(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the web app's server", () => {
  test("serves the built app cross-origin isolated", async () => {
    for (const path of ["", "main.js", "worker.js", "style.css"]) {
      const res = await fetch(new URL(path, server.url));
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get("cross-origin-opener-policy"), "same-origin", path);
      assert.equal(res.headers.get("cross-origin-embedder-policy"), "require-corp", path);
      assert.equal(res.headers.get("cross-origin-resource-policy"), "same-origin", path);
      await res.arrayBuffer();
    }
    const page = await fetch(server.url);
    assert.match(page.headers.get("content-type") ?? "", /^text\/html/);
    assert.match(await page.text(), /<script type="module" src="main.js">/);
    assert.match((await fetch(new URL("main.js", server.url))).headers.get("content-type") ?? "", /^text\/javascript/);
  });

  test("lists its models in models.json, two files of one name apart", async () => {
    const res = await fetch(new URL("models.json", server.url));
    assert.equal(res.headers.get("cross-origin-embedder-policy"), "require-corp");
    const { models } = (await res.json()) as { models: Array<{ name: string; url: string; sizeBytes: number }> };
    assert.deepEqual(
      models.map((m) => [m.name, m.sizeBytes]),
      [
        ["tiny model.gguf", 1000],
        ["tiny model.gguf", 29],
      ],
    );
    assert.notEqual(models[0]!.url, models[1]!.url);
    const whole = await fetch(new URL(models[0]!.url, server.url));
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get("accept-ranges"), "bytes");
    assert.equal(whole.headers.get("cross-origin-resource-policy"), "same-origin");
    assert.deepEqual(Buffer.from(await whole.arrayBuffer()), model);
    assert.equal(await (await fetch(new URL(models[1]!.url, server.url))).text(), "another file of the same name");
  });

  test("answers byte ranges of a model: resumed downloads", async () => {
    const url = new URL("models/0/tiny%20model.gguf", server.url);
    const part = await fetch(url, { headers: { range: "bytes=100-199" } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("content-range"), "bytes 100-199/1000");
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), model.subarray(100, 200));
    const rest = await fetch(url, { headers: { range: "bytes=990-" } });
    assert.deepEqual(Buffer.from(await rest.arrayBuffer()), model.subarray(990));
    const tail = await fetch(url, { headers: { range: "bytes=-5" } });
    assert.equal(tail.headers.get("content-range"), "bytes 995-999/1000");
    assert.deepEqual(Buffer.from(await tail.arrayBuffer()), model.subarray(995));
    const beyond = await fetch(url, { headers: { range: "bytes=1000-" } });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers.get("content-range"), "bytes */1000");
    await beyond.arrayBuffer();
    const head = await fetch(url, { method: "HEAD" });
    assert.equal(head.headers.get("content-length"), "1000");
  });

  test("serves nothing outside the app and the listed models, and only GET and HEAD", async () => {
    for (const path of ["/../package.json", "/%2e%2e/package.json", "/..%2fpackage.json", "/models/2/x.gguf", "/models/0/other.gguf", "/%E0%A4%A"]) {
      assert.equal(await rawGet(server.url, path), 404, path);
    }
    const post = await fetch(server.url, { method: "POST", body: "x" });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD");
    await post.arrayBuffer();
  });

  test("refuses a missing model, a folder and an app that is not built, naming them", async () => {
    await assert.rejects(serveWebApp({ models: [join(dir, "missing.gguf")], port: 0 }), (e) => isInferenceError(e, "MODEL_NOT_FOUND") && e.message.includes("missing.gguf"));
    await assert.rejects(serveWebApp({ models: [join(dir, "a")], port: 0 }), (e) => isInferenceError(e, "INVALID_OPTION") && e.message.includes("is not a file"));
    await assert.rejects(serveWebApp({ appDir: dir, port: 0 }), (e) => isInferenceError(e, "IO") && e.message.includes("npm run build"));
  });
});
