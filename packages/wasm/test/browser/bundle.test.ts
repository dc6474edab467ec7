/**
 * The browser bundle (dist/browser/index.js) in real headless Chromium, one browser launch for
 * every case: the shared small models load from a local server by URL, as a Blob and as bytes,
 * and give the published greedy tokens; with threads (a cross-origin isolated page) and without
 * (a plain page: one thread, one console note) the tokens are the same; bad sources fail with
 * InferenceError codes.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import type { Browser, Page } from "puppeteer-core";
import { harness, inPage } from "./harness.js";

// Only the models' absence skips: without Chromium, launchBrowser fails saying how to get one.
const skip = harness.hasSharedModels() ? undefined : `shared models not found at ${harness.SHARED_MODELS} (a clone outside this workplace has none)`;

const STORIES = "/models/stories260K/stories260K.gguf";
const TINY = "/models/tinystories-656k/";

interface Greedy {
  text: string;
  ids: number[];
  progress: { phase: string; loadedBytes: number; totalBytes: number | undefined }[];
  kernels?: string;
  backend: string;
}
interface LoadFailure {
  code: string;
  message?: string;
  isInferenceError?: boolean;
}

describe("the browser bundle in headless Chromium", { skip }, () => {
  let browser: Browser;
  let isolated: Awaited<ReturnType<typeof harness.serve>>;
  let plain: Awaited<ReturnType<typeof harness.serve>>;
  const pages: Page[] = [];
  const expectedText = () => readFileSync(join(harness.SHARED_MODELS, "stories260K/expected-greedy-200.txt"), "utf8").replace(/\n$/, "");
  const tinyExpected = () =>
    JSON.parse(readFileSync(join(harness.SHARED_MODELS, "tinystories-656k/expected-greedy-100.json"), "utf8")) as {
      prompt: string;
      greedy_ids: number[];
    };
  const open = async (server: { origin: string }) => {
    const opened = await harness.openPage(browser, `${server.origin}/packages/wasm/test/browser/page/`);
    pages.push(opened.page);
    return opened;
  };

  /** A small app bundled by esbuild for the browser, served at /app/. */
  const app = mkdtempSync(join(tmpdir(), "infer-esbuild-app-"));
  /** A Hugging Face compatible hub as static files, served at /hub/: the tree API's answer and the files. */
  const hub = mkdtempSync(join(tmpdir(), "infer-fake-hub-"));
  const publish = (repo: string, folder: string, files: string[]) => {
    const tree = files.map((name) => ({ type: "file", path: name, size: statSync(join(folder, name)).size }));
    mkdirSync(join(hub, "api/models", repo, "tree"), { recursive: true });
    writeFileSync(join(hub, "api/models", repo, "tree/main"), JSON.stringify(tree));
    mkdirSync(join(hub, repo, "resolve/main"), { recursive: true });
    for (const name of files) copyFileSync(join(folder, name), join(hub, repo, "resolve/main", name));
  };

  before(async () => {
    const mounts = { "/models/": harness.SHARED_MODELS, "/app/": app, "/hub/": hub };
    publish("test/stories", join(harness.SHARED_MODELS, "stories260K"), ["stories260K.gguf", "expected-greedy-200.txt"]);
    publish("test/tiny", join(harness.SHARED_MODELS, "tinystories-656k"), ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
    [browser, isolated, plain] = await Promise.all([
      harness.launchBrowser(),
      harness.serve({ root: harness.REPO_ROOT, mounts }),
      harness.serve({ root: harness.REPO_ROOT, mounts, isolated: false }),
    ]);
  });
  after(async () => {
    await Promise.all(pages.map((page) => page.close().catch(() => undefined)));
    await browser?.close();
    await Promise.all([isolated?.close(), plain?.close()]);
    rmSync(app, { recursive: true, force: true });
    rmSync(hub, { recursive: true, force: true });
  });

  test("stories260K by URL: greedy 200 tokens equal the published text, with download progress", async () => {
    const { page, logs } = await open(isolated);
    const result = await inPage<Greedy>(page, "greedy", STORIES, { maxTokens: 200 });
    assert.equal(result.backend, "wasm");
    assert.equal(result.ids.length, 200);
    assert.equal(result.text, expectedText());
    const size = statSync(join(harness.SHARED_MODELS, "stories260K/stories260K.gguf")).size;
    const downloads = result.progress.filter((p) => p.phase === "download");
    assert.ok(downloads.length >= 1);
    assert.ok(downloads.every((p, i) => p.totalBytes === size && (i === 0 || p.loadedBytes >= downloads[i - 1]!.loadedBytes)));
    assert.equal(downloads.at(-1)!.loadedBytes, size);
    assert.deepEqual(logs.filter((line) => line.includes("one thread")), []);
  });

  test("threads on (isolated page, 2 workers) and off (plain page) give the same tokens; off is noted once", async () => {
    const on = await open(isolated);
    const threaded = await inPage<Greedy>(on.page, "greedy", STORIES, { maxTokens: 200, threads: 2 });
    assert.match(threaded.kernels!, /\(2 threads\)/);
    const off = await open(plain);
    assert.equal(await off.page.evaluate(() => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated), false);
    const single = await inPage<Greedy>(off.page, "greedy", STORIES, { maxTokens: 200, threads: 2 });
    assert.match(single.kernels!, /\(1 thread\)/);
    await inPage<Greedy>(off.page, "greedy", STORIES, { maxTokens: 8 });
    assert.deepEqual(single.ids, threaded.ids);
    assert.equal(threaded.text, expectedText());
    const notes = off.logs.filter((line) => line.includes("one thread"));
    assert.equal(notes.length, 1, off.logs.join("\n"));
    assert.match(notes[0]!, /Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
  });

  test("stories260K as a Blob and as an ArrayBuffer: the same text", async () => {
    const { page } = await open(isolated);
    for (const as of ["blob", "bytes"]) {
      const result = await inPage<Greedy>(page, "greedy", STORIES, { maxTokens: 200, as });
      assert.equal(result.text, expectedText(), as);
      assert.ok(result.progress.some((p) => p.phase === "load"), as);
    }
  });

  test("tinystories-656k from its folder's URL: greedy 100 ids equal the published ones", async () => {
    const { page } = await open(isolated);
    const expected = tinyExpected();
    const result = await inPage<Greedy>(page, "greedy", TINY, { prompt: expected.prompt, maxTokens: 100 });
    assert.deepEqual(result.ids, expected.greedy_ids);
  });

  test("two models in one page at once, each with its own workers, which close() ends", async () => {
    const { page } = await open(isolated);
    const expected = tinyExpected();
    type Held = { models: { generateText(p: string, o: object): Promise<{ text: string; tokens: { id: number }[] }>; close(): Promise<void> }[] };
    const cores = await page.evaluate(async (stories: string, tiny: string) => {
        const bundle = "/packages/wasm/dist/browser/index.js";
        const infer = await import(bundle);
        const web = globalThis as unknown as { location: { href: string }; navigator: { hardwareConcurrency: number }; models: unknown[] };
        const absolute = (url: string) => new URL(url, web.location.href).href;
        web.models = await Promise.all([infer.loadModel(absolute(stories)), infer.loadModel(absolute(tiny))]);
        return web.navigator.hardwareConcurrency;
      },
      STORIES,
      TINY,
    );
    // Each model computes on every core: the page's thread and one worker per other core.
    assert.equal(page.workers().length, 2 * (cores - 1));
    const [stories, tiny] = await page.evaluate(
      async (prompt: string) => {
        const [a, b] = (globalThis as unknown as Held).models;
        return [(await a!.generateText("", { maxTokens: 200, temperature: 0 })).text, (await b!.generateText(prompt, { maxTokens: 100, temperature: 0 })).tokens.map((t) => t.id)];
      },
      expected.prompt,
    );
    assert.equal(stories, expectedText());
    assert.deepEqual(tiny, expected.greedy_ids);
    await page.evaluate(async () => {
      await Promise.all((globalThis as unknown as Held).models.map((m) => m.close()));
    });
    for (let tries = 0; page.workers().length > 0 && tries < 50; tries++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(page.workers().length, 0);
  });

  test("a download cut mid-way resumes with an HTTP Range request", async () => {
    const { page } = await open(isolated);
    const result = await inPage<Greedy>(page, "greedy", `${STORIES}?cut=300000`, { maxTokens: 200, loadOptions: { cache: false } });
    assert.equal(result.text, expectedText());
    const ranged = isolated.requests.filter((r) => r.path === STORIES && r.range !== undefined);
    assert.equal(ranged.length, 1);
    // From the first byte not received: the server sent 300000, of which the browser may drop the tail it held when the connection broke.
    const from = Number(/^bytes=(\d+)-$/.exec(ranged[0]!.range!)?.[1]);
    assert.ok(from >= 0 && from <= 300_000, ranged[0]!.range);
    assert.equal(ranged[0]!.status, 206);
  });

  test("a downloaded model is kept in OPFS: loaded again without a request, listed with its size, deleted", async () => {
    const { page } = await open(isolated);
    const url = `${STORIES}?copy=cache-test`;
    const absolute = `${isolated.origin}${url}`;
    const size = statSync(join(harness.SHARED_MODELS, "stories260K/stories260K.gguf")).size;
    const fetched = () => isolated.requests.filter((r) => r.path === STORIES).length;
    const before = fetched();
    const first = await inPage<Greedy>(page, "greedy", url, { maxTokens: 200 });
    const second = await inPage<Greedy>(page, "greedy", url, { maxTokens: 200 });
    assert.equal(fetched() - before, 1);
    assert.equal(second.text, expectedText());
    assert.equal(first.text, expectedText());
    // From the cache the bytes are read ("load"), not downloaded.
    assert.deepEqual([...new Set(second.progress.map((p) => p.phase))], ["load"]);
    type State = { listed: { url: string; bytes: number }[]; files: string[] };
    // A download cut off before its record was written is never listed, and is removed.
    const state = await inPage<State>(page, "cacheState", { plantCut: "0".repeat(64) });
    assert.deepEqual(state.listed.filter((m) => m.url === absolute).map((m) => m.bytes), [size]);
    assert.ok(!state.files.includes("0".repeat(64)), state.files.join());
    assert.equal(await inPage<boolean>(page, "deleteCached", url), true);
    assert.deepEqual((await inPage<State>(page, "cacheState")).listed.filter((m) => m.url === absolute), []);
    await inPage<Greedy>(page, "greedy", url, { maxTokens: 8 });
    assert.equal(fetched() - before, 2);
  });

  test("bad sources fail with InferenceError codes, and the page goes on working", async () => {
    const { page } = await open(isolated);
    const fails = async (source: string, options: Record<string, unknown> = {}) => inPage<LoadFailure>(page, "loadError", source, options);
    const missing = await fails("/models/stories260K/missing.gguf");
    assert.deepEqual([missing.code, missing.isInferenceError], ["MODEL_NOT_FOUND", true]);
    assert.match(missing.message!, /missing\.gguf.*404/);
    const notGguf = await fails("/models/stories260K/expected-greedy-200.txt");
    assert.equal(notGguf.code, "MODEL_FORMAT");
    assert.match(notGguf.message!, /not a GGUF file/);
    assert.equal((await fails("hello, not a model", { as: "bytes" })).code, "MODEL_FORMAT");
    const huge = await fails("huge.gguf", { as: "huge" });
    assert.equal(huge.code, "UNSUPPORTED");
    assert.match(huge.message!, /huge\.gguf: 5368709120 bytes do not fit the WebAssembly kernels' memory/);
    // A port nothing listens on (and another origin, which an isolated page may not read anyway).
    assert.equal((await fails("http://127.0.0.1:9/model.gguf")).code, "IO");
    assert.equal((await fails("/models/a-local-path.gguf".slice(1))).code, "NO_BACKEND_FOR_FORMAT");
    const after = await inPage<Greedy>(page, "greedy", STORIES, { maxTokens: 20 });
    assert.equal(after.text, expectedText().slice(0, after.text.length));
  });

  test("an app bundled by esbuild for the browser through the packages' exports runs the model", async () => {
    writeFileSync(
      join(app, "main.js"),
      [
        'import { loadModel, InferenceError } from "@infer/core";',
        'import "@infer/wasm";',
        "export async function run(url) {",
        "  const model = await loadModel(url);",
        "  try {",
        '    return { text: (await model.generateText("", { maxTokens: 200, temperature: 0 })).text, backend: model.backend };',
        "  } finally {",
        "    await model.close();",
        "  }",
        "}",
        "export { InferenceError };",
      ].join("\n"),
    );
    // A bundler resolves "browser" conditions (the engine's platform module) and fails on any node:* import.
    await build({
      entryPoints: [join(app, "main.js")],
      outfile: join(app, "dist", "main.js"),
      bundle: true,
      format: "esm",
      platform: "browser",
      nodePaths: [join(harness.REPO_ROOT, "node_modules")],
      logLevel: "silent",
    });
    // What the engine loads by URL beside itself, copied as an app's build would (esbuild leaves such URLs alone).
    const browserDist = join(harness.REPO_ROOT, "packages/wasm/dist/browser");
    for (const file of ["worker.js", "kernels.wasm", "kernels-relaxed.wasm"]) copyFileSync(join(browserDist, file), join(app, "dist", file));
    const { page } = await open(isolated);
    const result = (await page.evaluate(async (stories: string) => {
      const entry = "/app/dist/main.js";
      const { run } = await import(entry);
      return run(new URL(stories, (globalThis as unknown as { location: { href: string } }).location.href).href);
    }, STORIES)) as { text: string; backend: string };
    assert.equal(result.backend, "wasm");
    assert.equal(result.text, expectedText());
  });

  test("hf: references resolve through @infer/hub's browser bundle to URLs the engine loads", async () => {
    const { page } = await open(isolated);
    const expected = tinyExpected();
    type Resolved = { stories: { url: string; text: string }; tiny: { url: string; ids: number[] }; missing: string };
    const result = (await page.evaluate(async (prompt: string) => {
      const [infer, hub] = await Promise.all([import("/packages/wasm/dist/browser/index.js" as string), import("/packages/hub/dist/browser/index.js" as string)]);
      const endpoint = `${(globalThis as unknown as { location: { origin: string } }).location.origin}/hub`;
      const run = async (spec: string, input: string, maxTokens: number) => {
        const url: string = await hub.resolveModelUrl(spec, { endpoint });
        const model = await infer.loadModel(url);
        try {
          const out = await model.generateText(input, { maxTokens, temperature: 0 });
          return { url, text: out.text as string, ids: out.tokens.map((t: { id: number }) => t.id) as number[] };
        } finally {
          await model.close();
        }
      };
      const missing = await hub.resolveModelUrl("hf:test/absent", { endpoint }).then(
        () => "resolved",
        (error: { code: string }) => error.code,
      );
      return { stories: await run("hf:test/stories", "", 200), tiny: await run("hf:test/tiny", prompt, 100), missing };
    }, expected.prompt)) as Resolved;
    assert.equal(result.stories.url, `${isolated.origin}/hub/test/stories/resolve/main/stories260K.gguf`);
    assert.equal(result.stories.text, expectedText());
    assert.equal(result.tiny.url, `${isolated.origin}/hub/test/tiny/resolve/main/`);
    assert.deepEqual(result.tiny.ids, expected.greedy_ids);
    assert.equal(result.missing, "MODEL_NOT_FOUND");
  });
});
