import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { mappedLibraryStamp, probeGpu } from "../src/gpu-probe.js";
import { getRuntime } from "../src/runtime.js";
import { runtimeAvailable } from "../src/runtime.js";

describe("the GPU probe (a child process decodes a tiny model before a GPU is trusted)", async () => {
  const skip = (await runtimeAvailable()) ? false : "no llama.cpp binary";
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-gpu-probe-test-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("the CPU binary passes: the probe model loads and decodes in the child", { skip }, async () => {
    assert.equal(await probeGpu("false"), undefined);
  });

  test("a flavour that cannot run fails with the child's reason, and the verdict is cached", { skip }, async () => {
    const cacheFile = join(dir, "probe.json");
    // No Vulkan binary is installed here: the child cannot even load one.
    const reason = await probeGpu("vulkan", { cacheFile, cacheKey: "test" });
    assert.match(reason ?? "", /^exit 1: error: /);
    assert.deepEqual(JSON.parse(await readFile(cacheFile, "utf8")), { "vulkan test": reason });
  });

  test("the cache key follows the GPU library's file: one rebuilt in place is probed again", async () => {
    const library = join(dir, "libggml-cuda.so");
    const maps = join(dir, "maps");
    await writeFile(maps, `7f00-7f10 r--p 00000000 00:2a 1234  ${library}\n7f10-7f20 r-xp 00000000 00:2a 99  /usr/lib/libc.so.6\n`);
    await writeFile(library, "prebuilt");
    const prebuilt = await mappedLibraryStamp("cuda", maps);
    assert.match(prebuilt, /^libggml-cuda\.so:8:\d+$/);
    await writeFile(library, "built for this GPU");
    assert.match(await mappedLibraryStamp("cuda", maps), /^libggml-cuda\.so:18:\d+$/);
    assert.equal(await mappedLibraryStamp("vulkan", maps), "");
    assert.equal(await mappedLibraryStamp("cuda", join(dir, "no-such-maps")), "");
  });

  test("the loaded CPU binary's ggml libraries are found in this process's maps (Linux)", { skip: skip || (process.platform !== "linux" && "not Linux") }, async () => {
    await getRuntime();
    assert.match(await mappedLibraryStamp("cpu"), /libggml-cpu[\w-]*\.so:\d+:\d+/);
  });

  test("a cached verdict is returned without running the child", async () => {
    const cacheFile = join(dir, "cached.json");
    await writeFile(cacheFile, JSON.stringify({ "cuda v1 GPU": "exit 1: error: cached", "metal v1 GPU": null }));
    assert.equal(await probeGpu("cuda", { cacheFile, cacheKey: "v1 GPU" }), "exit 1: error: cached");
    assert.equal(await probeGpu("metal", { cacheFile, cacheKey: "v1 GPU" }), undefined);
  });
});
