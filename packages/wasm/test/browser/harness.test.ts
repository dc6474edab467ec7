/**
 * The browser harness itself: its server isolates pages (or not) and answers Range requests, and
 * headless Chromium sees crossOriginIsolated accordingly.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harness } from "./harness.js";

test("the static server answers ranges, 404s and cut downloads", async () => {
  const dir = mkdtempSync(join(tmpdir(), "infer-harness-"));
  writeFileSync(join(dir, "data.bin"), Buffer.from([...Array(100).keys()]));
  const server = await harness.serve({ root: dir });
  try {
    const whole = await fetch(`${server.origin}/data.bin`);
    assert.equal(whole.headers.get("cross-origin-embedder-policy"), "require-corp");
    assert.equal((await whole.arrayBuffer()).byteLength, 100);
    const part = await fetch(`${server.origin}/data.bin`, { headers: { Range: "bytes=90-" } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("content-range"), "bytes 90-99/100");
    assert.deepEqual([...new Uint8Array(await part.arrayBuffer())], [90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
    assert.equal((await fetch(`${server.origin}/missing.bin`)).status, 404);
    assert.equal((await fetch(`${server.origin}/../etc/passwd`)).status, 404);
    const cut = await fetch(`${server.origin}/data.bin?cut=40`);
    assert.equal(cut.headers.get("content-length"), "100");
    await assert.rejects(cut.arrayBuffer());
    assert.deepEqual(server.requests.at(1), { path: "/data.bin", range: "bytes=90-", status: 206 });
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("pages are crossOriginIsolated exactly when the server sends COOP/COEP", async () => {
  const dir = mkdtempSync(join(tmpdir(), "infer-harness-"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>harness</title>");
  const browser = await harness.launchBrowser();
  const servers = await Promise.all([harness.serve({ root: dir }), harness.serve({ root: dir, isolated: false })]);
  try {
    const seen: unknown[] = [];
    for (const server of servers) {
      const { page } = await harness.openPage(browser, `${server.origin}/`);
      seen.push(await page.evaluate(() => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated));
      await page.close();
    }
    assert.deepEqual(seen, [true, false]);
  } finally {
    await Promise.all(servers.map((s) => s.close()));
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
