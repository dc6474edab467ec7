/**
 * A GPU flavour of llama.cpp can load and still abort the process at its first
 * kernel: node-llama-cpp 3.22's CUDA binaries carry machine code for some
 * architectures and PTX for the rest, and a driver older than the toolkit that
 * wrote the PTX cannot compile it ("the provided PTX was compiled with an
 * unsupported toolchain": an H200 on a CUDA 13.0 driver, docs/llama-cpp.md).
 * ggml turns that into abort(), which no JavaScript can catch. So before this
 * process trusts a GPU it was not told to use, a child process decodes two
 * tokens of a tiny model on it; only if that child exits cleanly is the GPU
 * used. The verdict is cached per binary version, GPU type, device names and
 * the GPU library's size and date (mappedLibraryStamp).
 * The child is gpu-probe-child.ts.
 */
import { spawn } from "node:child_process";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { GgmlType, GgufValueType, writeGguf, type GgufValueInput } from "@infer/formats";

/** Started by URL, so that it is found beside this module in dist/src and in the bundle alike. */
const CHILD_MODULE = new URL("./gpu-probe-child.js", import.meta.url);
/** Long enough for a first CUDA context and kernel load; a hung child counts as a failure. */
const PROBE_TIMEOUT_MS = 120_000;
/** The probe model: llama, 1 block, [64] hidden, 2 heads, [64] FFN, 263 tokens (3 special, 256 bytes, 4 words). */
const HIDDEN = 64;
const HEADS = 2;
const FFN = 64;
const VOCAB = 3 + 256 + 4;

const u32 = (value: number): GgufValueInput => ({ type: GgufValueType.UINT32, value });
const f32 = (value: number): GgufValueInput => ({ type: GgufValueType.FLOAT32, value });

/** A tiny llama GGUF (small deterministic weights, a SentencePiece-style vocabulary) for the probe. */
export function probeModelGguf(): Uint8Array {
  let seed = 1;
  const values = (length: number): Float32Array =>
    Float32Array.from({ length }, () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return (seed / 2147483648 - 0.5) * 0.1;
    });
  const ones = (length: number) => new Float32Array(length).fill(1);
  const matrix = (name: string, rows: number, cols: number) => ({ name, type: GgmlType.F32, shape: [cols, rows], data: values(rows * cols) });
  // SentencePiece-style with byte fallback: llama.cpp looks up "<0xNN>" for any byte its pieces miss.
  const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
  const words = ["\u2581a", "\u2581b", "a", "b"];
  const tokens = ["<unk>", "<s>", "</s>", ...bytes, ...words];
  const tokenTypes = Int32Array.from(tokens, (_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 3 + bytes.length ? 6 : 1)); // unknown, control, byte, normal
  return writeGguf({
    metadata: {
      "general.architecture": "llama",
      "general.name": "infer gpu probe",
      "llama.context_length": u32(64),
      "llama.embedding_length": u32(HIDDEN),
      "llama.block_count": u32(1),
      "llama.feed_forward_length": u32(FFN),
      "llama.attention.head_count": u32(HEADS),
      "llama.attention.head_count_kv": u32(HEADS),
      "llama.attention.layer_norm_rms_epsilon": f32(1e-5),
      "llama.rope.dimension_count": u32(HIDDEN / HEADS),
      "tokenizer.ggml.model": "llama",
      "tokenizer.ggml.tokens": tokens,
      "tokenizer.ggml.scores": new Float32Array(VOCAB),
      "tokenizer.ggml.token_type": tokenTypes,
      "tokenizer.ggml.bos_token_id": u32(1),
      "tokenizer.ggml.eos_token_id": u32(2),
    },
    tensors: [
      matrix("token_embd.weight", VOCAB, HIDDEN),
      { name: "output_norm.weight", type: GgmlType.F32, shape: [HIDDEN], data: ones(HIDDEN) },
      matrix("output.weight", VOCAB, HIDDEN),
      { name: "blk.0.attn_norm.weight", type: GgmlType.F32, shape: [HIDDEN], data: ones(HIDDEN) },
      matrix("blk.0.attn_q.weight", HIDDEN, HIDDEN),
      matrix("blk.0.attn_k.weight", HIDDEN, HIDDEN),
      matrix("blk.0.attn_v.weight", HIDDEN, HIDDEN),
      matrix("blk.0.attn_output.weight", HIDDEN, HIDDEN),
      { name: "blk.0.ffn_norm.weight", type: GgmlType.F32, shape: [HIDDEN], data: ones(HIDDEN) },
      matrix("blk.0.ffn_gate.weight", FFN, HIDDEN),
      matrix("blk.0.ffn_up.weight", FFN, HIDDEN),
      matrix("blk.0.ffn_down.weight", HIDDEN, FFN),
    ],
  });
}

export interface ProbeOptions {
  /** Cache file of verdicts; undefined: no cache. */
  cacheFile?: string;
  /** What identifies this binary and machine in the cache (version, device names). */
  cacheKey?: string;
}

/**
 * Name, size and modification time of each ggml library of `flavour` ("cuda" matches libggml-cuda.so) this
 * process has mapped, from Linux's /proc/self/maps; "" where there is none or no such file. Part of the
 * cache key, so that a library replaced in place (a CUDA backend built for this GPU, docs/llama-cpp.md)
 * is probed again instead of being judged by the verdict on the one it replaced.
 */
export async function mappedLibraryStamp(flavour: string, mapsFile = "/proc/self/maps"): Promise<string> {
  const maps = await readFile(mapsFile, "utf8").catch(() => "");
  const paths = new Set<string>();
  for (const line of maps.split("\n")) {
    const path = line.slice(line.indexOf("/"));
    if (line.includes("/") && basename(path).startsWith(`libggml-${flavour}`)) paths.add(path);
  }
  const stamps = await Promise.all(
    [...paths].sort().map(async (path) => {
      const info = await stat(path).catch(() => undefined);
      return info ? `${basename(path)}:${info.size}:${Math.floor(info.mtimeMs)}` : undefined;
    }),
  );
  return stamps.filter((stamp) => stamp !== undefined).join(",");
}

/** The default cache of GPU verdicts, beside the project's other per-machine caches. */
export function defaultProbeCache(): string {
  return join(process.env.INFER_CACHE_DIR ?? join(homedir(), ".cache", "infer"), "llama-cpp-gpu-probe.json");
}

/**
 * Whether llama.cpp's `gpu` flavour ("cuda", "vulkan", "metal"; "false" for the
 * CPU binary) runs a model in a child process: undefined when it does, else why not.
 */
export async function probeGpu(gpu: string, options: ProbeOptions = {}): Promise<string | undefined> {
  const { cacheFile, cacheKey } = options;
  const key = `${gpu} ${cacheKey ?? ""}`;
  const cache = cacheFile ? await readCache(cacheFile) : {};
  if (key in cache) return cache[key] ?? undefined;
  const dir = join(tmpdir(), `infer-gpu-probe-${process.pid}-${Date.now()}`);
  await mkdir(dir, { recursive: true });
  let verdict: string | undefined;
  try {
    const modelPath = join(dir, "probe.gguf");
    await writeFile(modelPath, probeModelGguf());
    verdict = await runChild(gpu, modelPath);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  if (cacheFile) await writeCache(cacheFile, { ...cache, [key]: verdict ?? null });
  return verdict;
}

function runChild(gpu: string, modelPath: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [fileURLToPath(CHILD_MODULE), gpu, modelPath], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-8192);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), PROBE_TIMEOUT_MS);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve(`the probe could not start: ${error.message}`);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(undefined);
      // The line that names the cause: llama.cpp's "CUDA error: ..." or the child's own error.
      const lines = stderr.split("\n").map((line) => line.trim()).filter(Boolean);
      const reason = lines.find((line) => /error:/i.test(line) && !/^\s*at /.test(line)) ?? lines.at(-1) ?? "no output";
      resolve(`${signal ? `killed by ${signal}` : `exit ${code}`}: ${reason.slice(0, 300)}`);
    });
  });
}

async function readCache(file: string): Promise<Record<string, string | null>> {
  try {
    const parsed: unknown = JSON.parse(await readFile(file, "utf8"));
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, string | null>) : {};
  } catch {
    return {};
  }
}

/** Written whole under a temporary name, then renamed: a reader never sees half a file. */
async function writeCache(file: string, cache: Record<string, string | null>): Promise<void> {
  try {
    await mkdir(join(file, ".."), { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    await writeFile(partial, JSON.stringify(cache, null, 2));
    await rename(partial, file);
  } catch {
    // A cache that cannot be written costs one probe per process, nothing else.
  }
}
