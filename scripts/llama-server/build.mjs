#!/usr/bin/env node
// Builds llama.cpp's `llama-server` from the source that ships inside node-llama-cpp (a git bundle), so the
// `remote` backend is tested against the same llama.cpp the `llama_cpp` backend runs, and nothing is downloaded.
// The binary goes to a per-machine cache outside the clone, keyed by llama.cpp's version; later calls reuse it.
//   node scripts/llama-server/build.mjs         prints the binary's path (building it when missing)
//   node scripts/llama-server/build.mjs --check prints the path when cached, else exits 1 without building
// Environment: INFER_LLAMA_SERVER_CACHE overrides the cache root (default ~/.cache/infer/llama-server).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, openSync, closeSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const llamaDir = join(root, "node_modules", "node-llama-cpp", "llama");

function run(cmd, args, cwd) {
  const result = spawnSync(cmd, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (exit ${result.status ?? result.signal})`);
}

function capture(cmd, args, cwd) {
  const result = spawnSync(cmd, args, { cwd, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${result.stderr}`);
  return result.stdout.trim();
}

/** llama.cpp's version as node-llama-cpp records it: the release tag plus the bundled commit. */
export function llamaCppVersion() {
  const info = JSON.parse(readFileSync(join(llamaDir, "llama.cpp.info.json"), "utf8"));
  const heads = capture("git", ["bundle", "list-heads", join(llamaDir, "gitRelease.bundle")]);
  const commit = heads.split(/\s+/)[0];
  if (!/^[0-9a-f]{40}$/.test(commit ?? "")) throw new Error(`unexpected bundle heads: ${heads}`);
  return `${info.tag}-${commit.slice(0, 12)}`;
}

export function cacheRoot() {
  return process.env.INFER_LLAMA_SERVER_CACHE ?? join(homedir(), ".cache", "infer", "llama-server");
}

/** Where the binary lives (or will live) for this checkout's llama.cpp. */
export function llamaServerPath() {
  return join(cacheRoot(), llamaCppVersion(), "llama-server");
}

// Only what the tests use: CPU, a static self-contained binary, no HTTPS client, no web UI fetched from the
// network, no tests/examples. GGML_NATIVE off so a cache copied between machines (CI) still runs.
const cmakeOptions = [
  "-G", "Ninja",
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DGGML_NATIVE=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_APP=OFF",
  "-DLLAMA_BUILD_SERVER=ON",
  "-DLLAMA_BUILD_TOOLS=ON",
];

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Holds the cache's build lock (a file naming the building process) while
 * `work` runs, so that test processes started together build once: the others
 * wait for the holder, and take over a lock whose holder died.
 */
function withBuildLock(work) {
  const lock = join(cacheRoot(), ".build.lock");
  mkdirSync(cacheRoot(), { recursive: true });
  for (;;) {
    try {
      closeSync(openSync(lock, "wx"));
      writeFileSync(lock, String(process.pid));
      break;
    } catch {
      const holder = Number(readFileSync(lock, "utf8") || "0");
      if (holder > 0 && !alive(holder)) rmSync(lock, { force: true });
      else sleepSync(2_000);
    }
  }
  try {
    return work();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** Returns the llama-server binary's path, building it first when the cache has none for this version. */
export function ensureLlamaServer({ log = console.error } = {}) {
  const binary = llamaServerPath();
  if (existsSync(binary)) return binary;
  return withBuildLock(() => {
    if (existsSync(binary)) return binary; // built by the process we waited for
    // Work folders of builds that were killed.
    for (const name of readdirSync(cacheRoot())) {
      const pid = /^\.build-(\d+)$/.exec(name)?.[1];
      if (pid && !alive(Number(pid))) rmSync(join(cacheRoot(), name), { recursive: true, force: true });
    }
    build(binary, log);
    return binary;
  });
}

function build(binary, log) {
  const versionDir = dirname(binary);
  const work = join(cacheRoot(), `.build-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    log(`llama-server: building ${versionDir} (once per machine; slow)`);
    const src = join(work, "src");
    run("git", ["clone", "--quiet", join(llamaDir, "gitRelease.bundle"), src], work);
    const buildDir = join(work, "build");
    run("cmake", ["-S", src, "-B", buildDir, ...cmakeOptions], work);
    run("cmake", ["--build", buildDir, "--target", "llama-server", "--parallel"], work);
    mkdirSync(versionDir, { recursive: true });
    writeFileSync(join(versionDir, "BUILD.txt"), `cmake ${cmakeOptions.join(" ")}\n`);
    // Rename last, so a half-built or interrupted build never looks cached.
    renameSync(join(buildDir, "bin", "llama-server"), binary);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--check")) {
    const binary = llamaServerPath();
    if (!existsSync(binary)) process.exit(1);
    console.log(binary);
  } else {
    console.log(ensureLlamaServer());
  }
}
