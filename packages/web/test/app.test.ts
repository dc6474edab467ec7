// The app's modules that need no page: formatting, settings, sources, error headlines.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { completionPrompt } from "../src/app/conversation.js";
import { headlineOf, reportOf } from "../src/app/errors.js";
import { DownloadMeter, formatBytes, formatDuration } from "../src/app/format.js";
import { readSettings } from "../src/app/settings.js";
import { resolveModelUrl } from "../src/app/sources.js";
import { parseRange } from "../src/server/ranges.js";

describe("the chat app's logic", () => {
  test("formats sizes, durations, speed and time left", () => {
    assert.equal(formatBytes(512), "512 B");
    assert.equal(formatBytes(1536), "1.5 KB");
    assert.equal(formatBytes(200 * 1024 * 1024), "200 MB");
    assert.equal(formatDuration(42.4), "42 s");
    assert.equal(formatDuration(95), "1 min 35 s");
    assert.equal(formatDuration(3700), "1 h 1 min");
    const meter = new DownloadMeter();
    assert.equal(meter.update(0, 0), 0);
    assert.equal(meter.update(1024 * 1024, 1000), 1024 * 1024);
    assert.equal(meter.describe(1024 * 1024, 11 * 1024 * 1024, 1024 * 1024), "1.0 MB of 11 MB · 1.0 MB/s · 10 s left");
    assert.equal(meter.describe(1024, undefined, 0), "1.0 KB");
    // Old samples leave the window: the speed follows a slowdown.
    meter.update(2 * 1024 * 1024, 2000);
    meter.update(2 * 1024 * 1024 + 1024, 6000);
    assert.ok(meter.update(2 * 1024 * 1024 + 2048, 7000) < 10_000);
  });

  test("reads settings, naming the one out of range", () => {
    assert.deepEqual(readSettings({ temperature: "0", topP: "0.9", maxTokens: "64" }), { temperature: 0, topP: 0.9, maxTokens: 64 });
    assert.match((readSettings({ temperature: "3", topP: "0.9", maxTokens: "64" }) as { invalid: string }).invalid, /^Temperature must be/);
    assert.match((readSettings({ temperature: "1", topP: "", maxTokens: "64" }) as { invalid: string }).invalid, /^Top-p must be/);
    assert.match((readSettings({ temperature: "1", topP: "1", maxTokens: "1.5" }) as { invalid: string }).invalid, /^Max tokens must be a whole number/);
  });

  test("a model without a chat template continues the conversation's text", () => {
    assert.equal(completionPrompt([{ role: "user", content: "Once upon" }]), "Once upon");
    assert.equal(
      completionPrompt([
        { role: "user", content: "A" },
        { role: "assistant", content: "B" },
        { role: "user", content: "C" },
      ]),
      "A\nB\nC",
    );
  });

  test("errors get a readable headline by code", () => {
    assert.match(headlineOf({ code: "MODEL_FORMAT", message: "bad magic" }), /not a model/);
    assert.match(headlineOf({ code: "MODEL_NOT_FOUND", message: "HTTP 404" }), /could not be downloaded/);
    assert.match(headlineOf(reportOf(new RangeError("WebAssembly.Memory(): could not allocate memory"))), /too large/);
    assert.match(headlineOf({ code: "UNSUPPORTED", message: "m.gguf: 5000000000 bytes do not fit the WebAssembly kernels' memory" }), /too large/);
    assert.match(headlineOf(reportOf(new TypeError("Failed to fetch"))), /network/);
    assert.deepEqual(reportOf("boom"), { code: "INTERNAL", message: "boom" });
  });

  test("resolves URLs and hf: references to what the engine downloads", async () => {
    assert.equal(await resolveModelUrl(" models/0/a.gguf ", "http://127.0.0.1:1/"), "http://127.0.0.1:1/models/0/a.gguf");
    assert.equal(await resolveModelUrl("https://example.com/m.gguf", "http://127.0.0.1:1/"), "https://example.com/m.gguf");
    await assert.rejects(resolveModelUrl("", "http://x/"), (e) => isInferenceError(e, "INVALID_OPTION"));
    await assert.rejects(resolveModelUrl("file:///etc/passwd", "http://x/"), (e) => isInferenceError(e, "INVALID_OPTION") && /http\(s\)/.test(e.message));
    await assert.rejects(resolveModelUrl("hf:not a repo", "http://x/"), (e) => isInferenceError(e, "INVALID_OPTION"));
    // A hub that lists one repository.
    const tree = [
      { type: "file", path: "m.Q4_0.gguf", size: 10 },
      { type: "file", path: "m.Q8_0.gguf", size: 20 },
      { type: "file", path: "README.md", size: 1 },
    ];
    const hub = createServer((req, res) => {
      const found = req.url === "/api/models/org/repo/tree/main?recursive=true";
      res.writeHead(found ? 200 : 404, { "content-type": "application/json" });
      res.end(found ? JSON.stringify(tree) : "{}");
    });
    await new Promise<void>((ok) => hub.listen(0, "127.0.0.1", ok));
    const endpoint = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;
    try {
      assert.equal(await resolveModelUrl("hf:org/repo", "http://x/", { endpoint }), `${endpoint}/org/repo/resolve/main/m.Q8_0.gguf`);
      assert.equal(await resolveModelUrl("hf:org/repo:Q4_0", "http://x/", { endpoint }), `${endpoint}/org/repo/resolve/main/m.Q4_0.gguf`);
      await assert.rejects(resolveModelUrl("hf:org/repo:Q6_K", "http://x/", { endpoint }), (e) => isInferenceError(e, "MODEL_NOT_FOUND") && /Q6_K/.test(e.message));
      await assert.rejects(resolveModelUrl("hf:org/missing", "http://x/", { endpoint }), (e) => isInferenceError(e, "MODEL_NOT_FOUND"));
    } finally {
      hub.close();
    }
  });

  test("parses Range headers against a file's size", () => {
    assert.deepEqual(parseRange("bytes=0-9", 100), { start: 0, end: 9 });
    assert.deepEqual(parseRange("bytes=90-200", 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange("bytes=-10", 100), { start: 90, end: 99 });
    assert.deepEqual(parseRange("bytes=-500", 100), { start: 0, end: 99 });
    assert.deepEqual(parseRange("bytes=5-6, 8-9", 100), { start: 5, end: 6 });
    assert.equal(parseRange("bytes=100-", 100), "unsatisfiable");
    assert.equal(parseRange("bytes=9-5", 100), "unsatisfiable");
    assert.equal(parseRange("bytes=-0", 100), "unsatisfiable");
    assert.equal(parseRange(undefined, 100), undefined);
    assert.equal(parseRange("items=0-5", 100), undefined);
    assert.equal(parseRange("bytes=-", 100), undefined);
  });
});
