import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { listBackends } from "@infer/core";
import { registerBackends } from "../src/backends.js";
import { tinyHub } from "./helpers.js";

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
// --threads 1: the machine running tests is shared, and spinning worker threads of a tiny model only slow it down.
const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const gguf = `${models}stories260K/stories260K.gguf`;
const bin = fileURLToPath(new URL("../src/bin.js", import.meta.url));
const skip = existsSync(gguf) ? false : `needs ${gguf} (the shared test models are not here)`;

/** Runs node with `args` without blocking this process (a server in it must keep answering); resolves with its output. */
function spawnCollected(args: string[], env?: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { env });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

test("infer run stories260K greedy prints llama2.c's expected 200 tokens", { skip, timeout: 120_000 }, () => {
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
  const result = spawnSync(process.execPath, [bin, "run", gguf, "", "--max-tokens", "200", "--temperature", "0", "--threads", "1"], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout, expected);
});

// The same through each engine by name, for those whose package is installed here.
for (const backend of ["wasm", "llama_cpp"]) {
  const registered = await registerBackends().then(() => listBackends().includes(backend));
  const why = skip || (registered ? false : `backend ${backend} is not installed or failed to load`);
  test(`infer run --backend ${backend} stories260K prints the expected 200 tokens`, { skip: why, timeout: 120_000 }, () => {
    const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
    const args = [bin, "run", gguf, "", "-n", "200", "-t", "0", "--threads", "1", "--backend", backend];
    const result = spawnSync(process.execPath, args, { encoding: "utf8" });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, expected);
  });
}

{
  const registered = await registerBackends().then(() => listBackends().includes("llama_cpp"));
  const why = skip || (registered ? false : "backend llama_cpp is not installed or failed to load");
  test("infer run --isolate runs llama_cpp in a child process with the same text; wasm refuses it", { skip: why, timeout: 120_000 }, () => {
    const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
    const args = [bin, "run", gguf, "", "-n", "200", "-t", "0", "--threads", "1", "--isolate"];
    const isolated = spawnSync(process.execPath, [...args, "--backend", "llama_cpp"], { encoding: "utf8" });
    assert.equal(isolated.status, 0, isolated.stderr);
    assert.equal(isolated.stdout, expected);
    const refused = spawnSync(process.execPath, [...args, "--backend", "wasm"], { encoding: "utf8" });
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /UNSUPPORTED|isolate/);
  });
}

test("infer run --batch-size: a prompt in batches of 2 prints the same text; 0 is refused by name", { skip, timeout: 120_000 }, () => {
  const args = [bin, "run", gguf, "Once upon a time, there was a little dog", "-n", "24", "-t", "0", "--threads", "1", "--backend", "wasm"];
  const whole = spawnSync(process.execPath, args, { encoding: "utf8" });
  const chunked = spawnSync(process.execPath, [...args, "--batch-size", "2"], { encoding: "utf8" });
  assert.equal(whole.status, 0, whole.stderr);
  assert.equal(chunked.status, 0, chunked.stderr);
  assert.equal(chunked.stdout, whole.stdout);
  const refused = spawnSync(process.execPath, [...args, "--batch-size", "0"], { encoding: "utf8" });
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /batchSize/);
});

test("infer run hf:... pulls from a hub (HF_ENDPOINT) into INFER_CACHE, then runs", { skip, timeout: 120_000 }, async () => {
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
  const hub = await tinyHub("karpathy/tinyllamas", "stories260K.gguf", readFileSync(gguf));
  const cache = mkdtempSync(join(tmpdir(), "infer-e2e-"));
  try {
    const env = { ...process.env, HF_ENDPOINT: hub.url, INFER_CACHE: cache };
    const args = [bin, "run", "hf:karpathy/tinyllamas:stories260K.gguf", "", "-n", "200", "-t", "0", "--threads", "1"];
    // Asynchronous spawn: the hub runs in this process and must keep answering.
    const result = await spawnCollected(args, env);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, expected);
    assert.match(result.stderr, /stories260K\.gguf \[#+\] 100%/);
  } finally {
    hub.server.close();
    rmSync(cache, { recursive: true, force: true });
  }
});

test("infer run <url of a .gguf> downloads it through the backend with a progress bar, then runs", { skip, timeout: 120_000 }, async () => {
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
  const content = readFileSync(gguf);
  const server = createServer((req, res) => {
    if (req.url !== "/models/stories260K.gguf") return void res.writeHead(404).end();
    res.writeHead(200, { "content-length": content.length, "content-type": "application/octet-stream" });
    res.end(content);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/models/stories260K.gguf`;
    const args = [bin, "run", url, "", "-n", "200", "-t", "0", "--threads", "1"];
    // Asynchronous spawn: the server runs in this process and must keep answering.
    const result = await spawnCollected(args);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, expected);
    assert.ok(result.stderr.includes(`${url} [########################] 100%`), result.stderr);
  } finally {
    server.close();
  }
});

test("infer run --json and infer info on stories260K", { skip, timeout: 120_000 }, () => {
  const run = spawnSync(process.execPath, [bin, "run", gguf, "", "-n", "20", "-t", "0", "--json", "--threads", "1"], { encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  const result = JSON.parse(run.stdout);
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8");
  assert.ok(expected.startsWith(result.text) && result.text.length > 20, result.text);
  assert.equal(result.finishReason, "length");
  assert.equal(result.metrics.generatedTokens, 20);
  const info = spawnSync(process.execPath, [bin, "info", gguf, "--threads", "1"], { encoding: "utf8" });
  assert.equal(info.status, 0, info.stderr);
  // stories260K: llama, 5 layers, dim 64, a 512-token SentencePiece vocabulary (README of the shared models).
  assert.match(info.stdout, /^architecture\s+llama$/m);
  assert.match(info.stdout, /^layers\s+5$/m);
  assert.match(info.stdout, /^hidden size\s+64$/m);
  assert.match(info.stdout, /^vocabulary\s+512$/m);
});

test("infer bench --json on stories260K reports real rates", { skip, timeout: 120_000 }, () => {
  const run = spawnSync(process.execPath, [bin, "bench", gguf, "--json", "--runs", "1", "-n", "16", "--threads", "1"], { encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.equal(report.runs[0].generatedTokens, 16, "EOS is ignored, so every run decodes the asked count");
  assert.ok(report.runs[0].promptTokens > 10);
  assert.ok(report.loadMs > 0 && report.timeToFirstTokenMs > 0);
  assert.ok(report.prefillTokensPerSec > 0 && report.decodeTokensPerSec > 0);
  assert.ok(report.peakRssBytes > 1 << 20);
});
