/**
 * Model sources other than paths, in Node (the same code the browser bundle runs): http(s) URLs
 * with progress and resumed downloads, Blobs and bytes, and the errors of each.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type LoadProgress } from "@infer/core";
import { assertCode } from "@infer/core/testing";
import "../../src/index.js";
import { harness } from "../browser/harness.js";
import { SHARDS, writeShardedCopy } from "../browser/sharded-folder.js";

const shared = harness.SHARED_MODELS;
const skip = existsSync(shared) ? undefined : `shared models not found at ${shared} (a clone outside this workplace has none)`;
const STORIES = "stories260K/stories260K.gguf";
const expected = () => readFileSync(join(shared, "stories260K/expected-greedy-200.txt"), "utf8").replace(/\n$/, "");

async function greedy200(source: Parameters<typeof loadModel>[0], progress: LoadProgress[] = []): Promise<string> {
  await using model = await loadModel(source, { onProgress: (event) => progress.push(event) });
  return (await model.generateText("", { maxTokens: 200, temperature: 0 })).text;
}

describe("model sources in Node", { skip }, () => {
  let server: Awaited<ReturnType<typeof harness.serve>>;
  before(async () => (server = await harness.serve({ root: shared })));
  after(async () => server?.close());

  test("an http URL streams with download progress, a path reports load progress: the same text", async () => {
    const size = statSync(join(shared, STORIES)).size;
    const downloads: LoadProgress[] = [];
    assert.equal(await greedy200(`${server.origin}/${STORIES}`, downloads), expected());
    assert.ok(downloads.length > 0 && downloads.every((p) => p.phase === "download" && p.totalBytes === size));
    assert.equal(downloads.at(-1)!.loadedBytes, size);
    const loads: LoadProgress[] = [];
    assert.equal(await greedy200(join(shared, STORIES), loads), expected());
    assert.deepEqual(loads, [
      { phase: "load", loadedBytes: 0, totalBytes: size },
      { phase: "load", loadedBytes: size, totalBytes: size },
    ]);
  });

  test("a Blob and bytes give the same text", async () => {
    const bytes = readFileSync(join(shared, STORIES));
    assert.equal(await greedy200(new Blob([bytes])), expected());
    assert.equal(await greedy200(new Uint8Array(bytes)), expected());
  });

  test("a cut download resumes from the byte it stopped at", async () => {
    const before = server.requests.length;
    assert.equal(await greedy200(`${server.origin}/${STORIES}?cut=500000`), expected());
    const ranged = server.requests.slice(before).filter((r) => r.range !== undefined);
    // Node's fetch hands over every byte that arrived before the connection broke.
    assert.deepEqual([ranged.length, ranged[0]!.range, ranged[0]!.status], [1, "bytes=500000-", 206]);
  });

  test("unreachable, 404, not GGUF: IO, MODEL_NOT_FOUND, MODEL_FORMAT naming the URL", async () => {
    await assertCode(loadModel("http://127.0.0.1:9/model.gguf"), "IO");
    const missing = await assertCode(loadModel(`${server.origin}/missing.gguf`), "MODEL_NOT_FOUND");
    assert.match(missing.message, /missing\.gguf.*404/);
    const text = await assertCode(loadModel(`${server.origin}/stories260K/expected-greedy-200.txt`), "MODEL_FORMAT");
    assert.match(text.message, /expected-greedy-200\.txt: not a GGUF file/);
    await assertCode(loadModel(new TextEncoder().encode("plain text")), "MODEL_FORMAT");
  });
});

describe("a sharded Hugging Face folder by URL in Node", { skip }, () => {
  const TINY = "tinystories-656k";
  const work = mkdtempSync(join(tmpdir(), "infer-sharded-"));
  const folder = (name: string) => {
    mkdirSync(join(work, name));
    return join(work, name);
  };
  let server: Awaited<ReturnType<typeof harness.serve>>;
  const tinyExpected = () => JSON.parse(readFileSync(join(shared, TINY, "expected-greedy-100.json"), "utf8")) as { prompt: string; greedy_ids: number[] };
  const greedy100 = async (source: string, progress: LoadProgress[] = []) => {
    await using model = await loadModel(source, { onProgress: (event) => progress.push(event) });
    const result = await model.generateText(tinyExpected().prompt, { maxTokens: 100, temperature: 0 });
    return { text: result.text, ids: result.tokens.map((token) => token.id) };
  };
  before(async () => {
    writeShardedCopy(join(shared, TINY), folder("sharded"));
    // The same shards, named in the index with the test server's ?cut=N: each download breaks part-way once.
    writeShardedCopy(join(shared, TINY), folder("cut"), (shard) => `${shard}?cut=20000`);
    writeShardedCopy(join(shared, TINY), folder("missing"));
    rmSync(join(work, "missing", SHARDS[1]!));
    writeShardedCopy(join(shared, TINY), folder("escaping"), (shard) => `../sharded/${shard}`);
    server = await harness.serve({ root: shared, mounts: { "/work/": work } });
  });
  after(async () => {
    await server?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("the shards stream one after another, progress over their total: the unsharded folder's text", async () => {
    const progress: LoadProgress[] = [];
    const sharded = await greedy100(`${server.origin}/work/sharded/`, progress);
    assert.deepEqual(sharded.ids, tinyExpected().greedy_ids);
    assert.equal(sharded.text, (await greedy100(`${server.origin}/${TINY}/`)).text);
    // The same from the path, where sharded folders loaded before.
    assert.deepEqual((await greedy100(join(work, "sharded"))).ids, sharded.ids);
    const total = SHARDS.reduce((sum, shard) => sum + statSync(join(work, "sharded", shard)).size, 0);
    const downloads = progress.filter((p) => p.phase === "download");
    assert.ok(downloads.every((p, i) => p.totalBytes === total && (i === 0 || p.loadedBytes >= downloads[i - 1]!.loadedBytes)));
    assert.equal(downloads.at(-1)!.loadedBytes, total);
    const fetched = server.requests.filter((r) => r.path.startsWith("/work/sharded/model-0000")).map((r) => r.path.slice("/work/sharded/".length));
    assert.deepEqual(new Set(fetched), new Set(SHARDS));
  });

  test("each shard's cut download resumes with its own Range request", async () => {
    const before = server.requests.length;
    assert.deepEqual((await greedy100(`${server.origin}/work/cut/`)).ids, tinyExpected().greedy_ids);
    const ranged = server.requests.slice(before).filter((r) => r.range !== undefined);
    assert.deepEqual(
      ranged.map((r) => [r.path, r.range, r.status]),
      SHARDS.map((shard) => [`/work/cut/${shard}`, "bytes=20000-", 206]),
    );
  });

  test("a missing shard, or one outside the folder, is MODEL_FORMAT naming the index and the shard, before any download", async () => {
    const progress: LoadProgress[] = [];
    const missing = await assertCode(loadModel(`${server.origin}/work/missing/`, { onProgress: (event) => progress.push(event) }), "MODEL_FORMAT");
    assert.match(missing.message, /missing\/model\.safetensors\.index\.json: weight_map names shard "model-00002-of-00002\.safetensors", which is missing \(http:.*\/work\/missing\/model-00002-of-00002\.safetensors\)/);
    assert.deepEqual(progress, []);
    const escaping = await assertCode(loadModel(`${server.origin}/work/escaping/`), "MODEL_FORMAT");
    assert.match(escaping.message, /escaping\/model\.safetensors\.index\.json: weight_map\[".*"\] names "\.\.\/sharded\/model-0000\d-of-00002\.safetensors", which is not a shard file name in the folder/);
    // Percent-encoded dots are the same ".." once the URL is resolved.
    writeFileSync(join(work, "escaping", "model.safetensors.index.json"), JSON.stringify({ weight_map: { x: `%2e%2e/sharded/${SHARDS[0]}` } }));
    const encoded = await assertCode(loadModel(`${server.origin}/work/escaping/`), "MODEL_FORMAT");
    assert.match(encoded.message, /names "%2e%2e\/sharded\/model-00001-of-00002\.safetensors", which is not a shard file name in the folder/);
  });
});

describe("downloads that cannot be resumed, models too large", () => {
  let server: Server;
  let origin: string;
  const body = Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(100_000)]);
  before(async () => {
    // Announces the whole file, sends part of it, and ignores Range requests (answers 200 again).
    server = createServer((_request, response) => {
      response.writeHead(200, { "Content-Length": String(body.length) });
      response.write(body.subarray(0, 40_000), () => response.socket?.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test("a cut the server cannot resume is IO saying how far it got", async () => {
    const error = await assertCode(loadModel(`${origin}/model.gguf`), "IO");
    assert.match(error.message, /stopped after \d+ of 100004 bytes and could not be resumed/);
  });

  test("a model larger than the kernels' memory fails before it is read, naming its size", async () => {
    const gguf = new TextEncoder().encode("GGUF");
    let sliced = 0;
    const huge = {
      size: 5 * 2 ** 30,
      name: "huge.gguf",
      slice: (start = 0, end = 4) => {
        sliced += end - start;
        return { size: end - start, slice: () => huge, arrayBuffer: async () => gguf.slice(start, Math.min(end, 4)).buffer };
      },
      arrayBuffer: async () => new ArrayBuffer(0),
    };
    const error = await assertCode(loadModel(huge), "UNSUPPORTED");
    assert.match(error.message, /huge\.gguf: 5368709120 bytes do not fit the WebAssembly kernels' memory/);
    // Only the first bytes were looked at.
    assert.ok(sliced <= 4096, String(sliced));
  });
});
