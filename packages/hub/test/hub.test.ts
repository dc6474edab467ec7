import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { cachedPath, parseHubRef, pull, registerAlias, removeCached, repoDir, resolveModel, selectFiles } from "../src/index.js";
import { fakeWeights, LocalHub } from "./local-hub.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("references and file selection", () => {
  test("parseHubRef reads repo, revision, quant tag and file", () => {
    assert.deepEqual(parseHubRef("hf:org/repo"), { repo: "org/repo", revision: "main" });
    assert.deepEqual(parseHubRef("hf:org/repo:Q8_0"), { repo: "org/repo", revision: "main", quant: "Q8_0" });
    assert.deepEqual(parseHubRef("hf:org/repo@v2:sub/m.Q4_0.gguf"), { repo: "org/repo", revision: "v2", file: "sub/m.Q4_0.gguf" });
    assert.equal(parseHubRef("./models/x.gguf"), undefined);
    for (const bad of ["hf:repo", "hf:a/b/c", "hf:../x", "hf:org/repo:../../etc.gguf"]) {
      assert.throws(() => parseHubRef(bad), (e: unknown) => isInferenceError(e, "INVALID_OPTION"), bad);
    }
  });

  const files = ["README.md", "m-F16.gguf", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "m-Q4_K_S.gguf", "mmproj-Q8_0.gguf"].map((path) => ({ path }));

  test("without a tag the best GGUF is chosen: Q8_0 first, never an mmproj", () => {
    assert.deepEqual(selectFiles({ repo: "o/r", revision: "main" }, files).files.map((f) => f.path), ["m-Q8_0.gguf"]);
    const noQ8 = files.filter((f) => !f.path.includes("Q8_0"));
    assert.deepEqual(selectFiles({ repo: "o/r", revision: "main" }, noQ8).files.map((f) => f.path), ["m-Q4_K_M.gguf"]);
  });

  test("a quant tag matches a whole tag, case-insensitively; a missing one lists what exists", () => {
    assert.deepEqual(selectFiles({ repo: "o/r", revision: "main", quant: "q4_k_s" }, files).files.map((f) => f.path), ["m-Q4_K_S.gguf"]);
    assert.throws(
      () => selectFiles({ repo: "o/r", revision: "main", quant: "Q4_K" }, files),
      (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND") && /m-Q8_0\.gguf/.test(e.message),
    );
  });

  test("split GGUFs come with all their shards; safetensors repos bring config and tokenizer", () => {
    const split = [{ path: "big-Q8_0-00002-of-00002.gguf" }, { path: "big-Q8_0-00001-of-00002.gguf" }, { path: "big-Q4_0.gguf" }];
    assert.deepEqual(selectFiles({ repo: "o/r", revision: "main" }, split).files.map((f) => f.path), [
      "big-Q8_0-00001-of-00002.gguf",
      "big-Q8_0-00002-of-00002.gguf",
    ]);
    const hf = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md", "onnx/model.safetensors"].map((path) => ({ path }));
    const chosen = selectFiles({ repo: "o/r", revision: "main" }, hf);
    assert.equal(chosen.format, "safetensors");
    assert.deepEqual(chosen.files.map((f) => f.path), ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
  });
});

describe("pulling from a local hub", () => {
  const gguf = fakeWeights(300_000, 7);
  const q4 = fakeWeights(100_000, 9);
  const weights = fakeWeights(50_000, 11);
  const config = Buffer.from(JSON.stringify({ model_type: "llama" }));
  const hub = new LocalHub({
    "test/tiny-GGUF": [
      { path: "tiny-Q8_0.gguf", content: gguf, lfs: true },
      { path: "tiny-Q4_0.gguf", content: q4, lfs: true },
      { path: "README.md", content: Buffer.from("# tiny") },
    ],
    "test/tiny-hf": [
      { path: "config.json", content: config },
      { path: "model.safetensors", content: weights, lfs: true },
      { path: "tokenizer.json", content: Buffer.from("{}") },
      { path: "README.md", content: Buffer.from("# hf") },
    ],
    "test/corrupt": [{ path: "c-Q8_0.gguf", content: fakeWeights(1000, 3), servedContent: fakeWeights(1000, 4), lfs: true }],
  });
  let endpoint: string;
  let cache: string;
  before(async () => {
    endpoint = await hub.start();
    cache = await mkdtemp(join(tmpdir(), "infer-hub-"));
  });
  after(async () => {
    await hub.stop();
    await rm(cache, { recursive: true, force: true });
  });

  test("a pull lands the best GGUF, verified, and later resolves need no network", async () => {
    const progress: number[] = [];
    const result = await pull("hf:test/tiny-GGUF", { endpoint, cacheDir: cache, onProgress: (p) => progress.push(p.received) });
    assert.equal(result.format, "gguf");
    assert.equal(result.path, join(repoDir({ repo: "test/tiny-GGUF", revision: "main" }, cache), "tiny-Q8_0.gguf"));
    assert.equal(sha256(await readFile(result.path)), sha256(gguf));
    assert.equal(progress.at(-1), gguf.length);
    assert.deepEqual(await readdir(join(result.path, "..")).then((n) => n.filter((x) => x.endsWith(".part") || x.endsWith(".lock"))), []);
    const before = hub.requests.length;
    assert.equal(await resolveModel("hf:test/tiny-GGUF", { endpoint, cacheDir: cache }), result.path);
    assert.equal(hub.requests.length, before, "served from the cache");
  });

  test("an interrupted transfer resumes with a Range request and verifies", async () => {
    hub.dropOnce = "tiny-Q4_0.gguf";
    const half = q4.length >> 1;
    // The cut waits until the half has reached the client's part file.
    const part = join(repoDir({ repo: "test/tiny-GGUF", revision: "main" }, cache), "tiny-Q4_0.gguf.part");
    hub.dropAfter = async () => {
      while (((await stat(part).catch(() => undefined))?.size ?? 0) < half) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    const result = await pull("hf:test/tiny-GGUF:Q4_0", { endpoint, cacheDir: cache });
    hub.dropAfter = undefined;
    assert.deepEqual(result.files[0]!.resumedAt, [half]);
    assert.deepEqual(hub.downloads("tiny-Q4_0.gguf").map((r) => r.range), [undefined, `bytes=${half}-`]);
    assert.ok((await readFile(result.path)).equals(q4));
  });

  test("a partial file left by an earlier run is resumed, not restarted", async () => {
    const dir = repoDir({ repo: "test/tiny-GGUF", revision: "main" }, join(cache, "other"));
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "tiny-Q8_0.gguf.part"), gguf.subarray(0, 123_456));
    const result = await pull("hf:test/tiny-GGUF:Q8_0", { endpoint, cacheDir: join(cache, "other") });
    assert.deepEqual(result.files[0]!.resumedAt, [123_456]);
    assert.equal(hub.downloads("tiny-Q8_0.gguf").at(-1)!.range, "bytes=123456-");
    assert.ok((await readFile(result.path)).equals(gguf));
  });

  test("concurrent pulls of one file download it once and agree", async () => {
    const root = join(cache, "concurrent");
    const seen = hub.downloads("tiny-Q8_0.gguf").length;
    const [a, b] = await Promise.all([pull("hf:test/tiny-GGUF", { endpoint, cacheDir: root }), pull("hf:test/tiny-GGUF", { endpoint, cacheDir: root })]);
    assert.equal(a.path, b.path);
    assert.ok((await readFile(a.path)).equals(gguf));
    assert.equal(hub.downloads("tiny-Q8_0.gguf").length - seen, 1);
  });

  test("concurrent pulls of other selections of one repository keep each other's manifest entries", async () => {
    const root = join(cache, "concurrent-selections");
    // Both selections finish together, many times over: each pull's manifest update must see the others'.
    const specs = ["hf:test/tiny-GGUF:Q4_0", "hf:test/tiny-GGUF:Q8_0", "hf:test/tiny-GGUF:Q4_0", "hf:test/tiny-GGUF:Q8_0"];
    for (let round = 0; round < 3; round++) {
      const roundRoot = join(root, String(round));
      await Promise.all(specs.map((spec) => pull(spec, { endpoint, cacheDir: roundRoot })));
      for (const spec of specs) assert.ok(await cachedPath(spec, { cacheDir: roundRoot }), `${spec} in the manifest after round ${round}`);
      const left = await readdir(repoDir({ repo: "test/tiny-GGUF", revision: "main" }, roundRoot));
      assert.deepEqual(left.filter((name) => name.endsWith(".tmp") || name.endsWith(".lock")), []);
    }
  });

  test("a safetensors repository gives a loadable folder with config and tokenizer", async () => {
    const result = await pull("hf:test/tiny-hf", { endpoint, cacheDir: cache });
    assert.equal(result.format, "safetensors");
    assert.deepEqual((await readdir(result.path)).filter((n) => !n.startsWith(".")).sort(), ["config.json", "model.safetensors", "tokenizer.json"]);
    assert.ok((await readFile(join(result.path, "model.safetensors"))).equals(weights));
  });

  test("a hash mismatch fails with MODEL_FORMAT and leaves no file behind", async () => {
    await assert.rejects(pull("hf:test/corrupt", { endpoint, cacheDir: cache }), (e: unknown) => isInferenceError(e, "MODEL_FORMAT") && /sha256/.test(e.message));
    const dir = repoDir({ repo: "test/corrupt", revision: "main" }, cache);
    assert.deepEqual(await readdir(dir), []);
  });

  test("a listing split over several pages is read whole", async () => {
    hub.pageSize = 1;
    try {
      const result = await pull("hf:test/tiny-hf", { endpoint, cacheDir: join(cache, "paged") });
      assert.deepEqual(result.files.map((f) => f.path).sort(), ["config.json", "model.safetensors", "tokenizer.json"]);
      assert.equal(hub.requests.filter((r) => r.url.startsWith("/api/models/test/tiny-hf/tree/")).length >= 4, true);
    } finally {
      hub.pageSize = 1000;
    }
  });

  test("unknown repositories and files are MODEL_NOT_FOUND", async () => {
    await assert.rejects(pull("hf:test/none", { endpoint, cacheDir: cache }), (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND"));
    await assert.rejects(pull("hf:test/tiny-GGUF:Q2_K", { endpoint, cacheDir: cache }), (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND"));
  });

  test("HF_TOKEN is sent as a bearer token; without it a gated hub says what to do", async () => {
    hub.requiredToken = "tok";
    try {
      await assert.rejects(pull("hf:test/tiny-hf", { endpoint, cacheDir: join(cache, "gated"), token: undefined }), (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND") && /HF_TOKEN/.test(e.message));
      const result = await pull("hf:test/tiny-hf", { endpoint, cacheDir: join(cache, "gated"), token: "tok" });
      assert.equal(result.format, "safetensors");
      assert.equal(hub.requests.at(-1)!.authorization, "Bearer tok");
    } finally {
      hub.requiredToken = undefined;
    }
  });

  test("aliases, local paths, offline resolves and rm", async () => {
    registerAlias("tiny-test", "hf:test/tiny-GGUF:Q8_0");
    const viaAlias = await resolveModel("tiny-test", { endpoint, cacheDir: cache });
    assert.ok((await readFile(viaAlias)).equals(gguf));
    assert.equal(await resolveModel(viaAlias), viaAlias, "a local path is used as it is");
    await assert.rejects(resolveModel("/no/such/model.gguf"), (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND"));
    await assert.rejects(resolveModel("hf:test/tiny-hf:Q8_0", { cacheDir: cache, pull: false }), (e: unknown) => isInferenceError(e, "MODEL_NOT_FOUND") && /infer pull/.test(e.message));
    await assert.rejects(removeCached("/etc", { cacheDir: cache }), (e: unknown) => isInferenceError(e, "INVALID_OPTION"));
    const removed = await removeCached("tiny-test", { cacheDir: cache });
    assert.equal(await stat(removed).catch(() => undefined), undefined);
    assert.equal(await cachedPath("tiny-test", { cacheDir: cache }), undefined);
  });
});
