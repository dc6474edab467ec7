/**
 * Hugging Face folders by URL in headless Chromium: a sharded folder (its safetensors split in
 * two with an index) gives the unsharded folder's tokens; a folder is kept in OPFS whole (config,
 * tokenizer, index, shards) and loaded again without a request, listed once with its total size,
 * deleted with every file (by any URL that loads it); a tab closed mid-download leaves nothing
 * behind.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { harness, inPage } from "./harness.js";
import { SHARDS, writeShardedCopy } from "./sharded-folder.js";

const skip = harness.hasSharedModels() ? undefined : `shared models not found at ${harness.SHARED_MODELS} (a clone outside this workplace has none)`;

const TINY = join(harness.SHARED_MODELS, "tinystories-656k");

interface Greedy {
  ids: number[];
  text: string;
  progress: { phase: string; loadedBytes: number; totalBytes: number | undefined }[];
}
interface CacheState {
  listed: { url: string; bytes: number; files?: { name: string; bytes: number }[] }[];
  files: string[];
}

describe("model folders by URL in headless Chromium", { skip }, () => {
  let browser: Browser;
  let server: Awaited<ReturnType<typeof harness.serve>>;
  const pages: Page[] = [];
  const work = mkdtempSync(join(tmpdir(), "infer-browser-folders-"));
  /** A sharded copy of tinystories-656k at /work/<name>/. */
  const sharded = (name: string) => {
    mkdirSync(join(work, name));
    writeShardedCopy(TINY, join(work, name));
    return `/work/${name}/`;
  };
  const expected = () => JSON.parse(readFileSync(join(TINY, "expected-greedy-100.json"), "utf8")) as { prompt: string; greedy_ids: number[] };
  const open = async () => {
    const opened = await harness.openPage(browser, `${server.origin}/packages/wasm/test/browser/page/`);
    pages.push(opened.page);
    return opened.page;
  };
  const greedy = (page: Page, url: string, loadOptions: Record<string, unknown> = {}) =>
    inPage<Greedy>(page, "greedy", url, { prompt: expected().prompt, maxTokens: 100, loadOptions });
  const requestsUnder = (folder: string) => server.requests.filter((r) => r.path.startsWith(folder)).length;

  before(async () => {
    [browser, server] = await Promise.all([
      harness.launchBrowser(),
      harness.serve({ root: harness.REPO_ROOT, mounts: { "/models/": harness.SHARED_MODELS, "/work/": work } }),
    ]);
  });
  after(async () => {
    await Promise.all(pages.map((page) => page.close().catch(() => undefined)));
    await browser?.close();
    await server?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("a sharded folder's URL: the unsharded folder's ids, download progress over both shards", async () => {
    const page = await open();
    const url = sharded("plain");
    const result = await greedy(page, url, { cache: false });
    assert.deepEqual(result.ids, expected().greedy_ids);
    const unsharded = await greedy(page, "/models/tinystories-656k/", { cache: false });
    assert.equal(result.text, unsharded.text);
    const total = SHARDS.reduce((sum, shard) => sum + statSync(join(work, "plain", shard)).size, 0);
    const downloads = result.progress.filter((p) => p.phase === "download");
    assert.ok(downloads.every((p, i) => p.totalBytes === total && (i === 0 || p.loadedBytes >= downloads[i - 1]!.loadedBytes)));
    assert.equal(downloads.at(-1)!.loadedBytes, total);
  });

  test("a folder is cached whole: loaded again with no request, listed with its total size, deleted with all its files", async () => {
    const page = await open();
    const url = sharded("cached");
    const absolute = `${server.origin}${url}`;
    const filesBefore = (await inPage<CacheState>(page, "cacheState")).files;
    const first = await greedy(page, url);
    const requested = requestsUnder(url);
    const second = await greedy(page, url);
    assert.equal(requestsUnder(url), requested, "the second load asked the server for nothing");
    assert.deepEqual(second.ids, expected().greedy_ids);
    assert.equal(second.text, first.text);
    assert.deepEqual([...new Set(second.progress.map((p) => p.phase))], ["load"]);

    // The files loading reads, as served (what a folder without chat_template.jinja has of them).
    const kept = ["config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", ...SHARDS];
    const sizes = kept.map((name) => ({ name, bytes: statSync(join(work, "cached", name)).size }));
    const state = await inPage<CacheState>(page, "cacheState");
    const entry = state.listed.filter((m) => m.url === absolute);
    assert.equal(entry.length, 1);
    assert.deepEqual(
      [...entry[0]!.files!].sort((a, b) => a.name.localeCompare(b.name)),
      [...sizes].sort((a, b) => a.name.localeCompare(b.name)),
    );
    assert.equal(entry[0]!.bytes, sizes.reduce((sum, file) => sum + file.bytes, 0));
    // One record and one data file per kept file.
    assert.equal(state.files.length - filesBefore.length, kept.length + 1);

    // Listed under the folder's URL, and found by any URL that loads the folder.
    assert.equal(await inPage<boolean>(page, "deleteCached", `${url}config.json`), true);
    const deleted = await inPage<CacheState>(page, "cacheState");
    assert.deepEqual(deleted.listed.filter((m) => m.url === absolute), []);
    assert.deepEqual(deleted.files, filesBefore);
    await greedy(page, url);
    assert.ok(requestsUnder(url) > requested, "after deletion the folder is downloaded again");
  });

  test("a tab closed mid-download leaves no entry and no files; a cut-off store's data is removed", async () => {
    const watcher = await open();
    const filesBefore = (await inPage<CacheState>(watcher, "cacheState")).files;
    const url = sharded("closed");
    const page = await open();
    // Slow enough that the download is still running when the tab closes.
    await page.emulateNetworkConditions({ download: 256 * 1024, upload: 256 * 1024, latency: 0 });
    await inPage<void>(page, "startLoad", url);
    for (let tries = 0; tries < 200; tries++) {
      if ((await page.evaluate(() => (globalThis as unknown as { loadedBytes: number }).loadedBytes)) > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const total = SHARDS.reduce((sum, shard) => sum + statSync(join(work, "closed", shard)).size, 0);
    const loaded = await page.evaluate(() => (globalThis as unknown as { loadedBytes: number }).loadedBytes);
    assert.ok(loaded > 0 && loaded < total, `${loaded} of ${total} bytes when the tab closes`);
    await page.close();
    const state = await inPage<CacheState>(watcher, "cacheState", { plantCut: `${"1".repeat(64)}-0` });
    assert.deepEqual(state.listed.filter((m) => m.url === `${server.origin}${url}`), []);
    assert.deepEqual(state.files, filesBefore);
  });
});
