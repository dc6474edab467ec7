import { randomUUID } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join, relative, resolve, sep } from "node:path";
import { InferenceError } from "@infer/core";
import { cacheDir, repoDir } from "./cache.js";
import { type DownloadProgress, downloadFile, withFileLock } from "./download.js";
import { authHeaders, connectionFromEnv, fileUrl, type HubConnection, listRepoFiles } from "./listing.js";
import { resolveAlias } from "./aliases.js";
import { hubRefOf } from "./model-url.js";
import { formatHubRef, type HubRef, parseHubRef } from "./ref.js";
import { selectFiles } from "./select.js";

export interface PullOptions extends Partial<HubConnection> {
  /** Cache root; default `cacheDir()`. */
  cacheDir?: string;
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress & { index: number; count: number }) => void;
  /** Extra attempts per file after a dropped connection (default 3). */
  retries?: number;
}

export interface PullResult {
  ref: HubRef;
  /** What to load: the .gguf file (first shard), or the folder of a safetensors model. */
  path: string;
  format: "gguf" | "safetensors";
  files: Array<{ path: string; bytes: number; cached: boolean; resumedAt: number[] }>;
}

/** What a pull recorded about one selection of a repository, so later resolves need no network. */
interface ManifestEntry {
  path: string;
  format: "gguf" | "safetensors";
  files: string[];
}

const MANIFEST = ".infer-pull.json";
const selectionKey = (ref: HubRef) => ref.file ?? (ref.quant ? ref.quant.toUpperCase() : "");

async function readManifest(dir: string): Promise<Record<string, ManifestEntry>> {
  try {
    const parsed: unknown = JSON.parse(await readFile(join(dir, MANIFEST), "utf8"));
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, ManifestEntry>) : {};
  } catch {
    return {};
  }
}

/** The local path of an already pulled reference, or undefined. */
export async function cachedPath(spec: string | HubRef, options: { cacheDir?: string } = {}): Promise<string | undefined> {
  const ref = hubRefOf(spec);
  if (!ref) return undefined;
  const dir = repoDir(ref, options.cacheDir ?? cacheDir());
  const entry = (await readManifest(dir))[selectionKey(ref)];
  if (!entry || typeof entry.path !== "string" || !Array.isArray(entry.files)) return undefined;
  for (const file of entry.files) {
    if (!(await stat(join(dir, file)).catch(() => undefined))) return undefined;
  }
  return join(dir, entry.path);
}

/**
 * Downloads a model from a Hugging Face compatible hub into the cache (each
 * file verified, resumable) and returns what to load.
 */
export async function pull(spec: string | HubRef, options: PullOptions = {}): Promise<PullResult> {
  const ref = hubRefOf(spec);
  if (!ref) throw new InferenceError("INVALID_OPTION", `'${String(spec)}' is neither an alias nor an hf:org/repo reference`);
  const conn = connectionFromEnv(options);
  const dir = repoDir(ref, options.cacheDir ?? cacheDir());
  const listing = await listRepoFiles(conn, ref);
  const selection = selectFiles(ref, listing);
  const files: PullResult["files"] = [];
  for (const [index, file] of selection.files.entries()) {
    const result = await downloadFile({
      url: fileUrl(conn, ref, file.path),
      dest: join(dir, ...file.path.split("/")),
      label: file.path,
      size: file.size,
      sha256: file.sha256,
      gitSha1: file.gitSha1,
      headers: authHeaders(conn),
      fetch: conn.fetch,
      signal: options.signal,
      retries: options.retries,
      onProgress: options.onProgress && ((p) => options.onProgress!({ ...p, index, count: selection.files.length })),
    });
    files.push({ path: file.path, bytes: (await stat(result.path)).size, cached: result.cached, resumedAt: result.resumedAt });
  }
  const entryPath = selection.format === "gguf" ? selection.files[0]!.path : ".";
  await mkdir(dir, { recursive: true });
  // Read, add and write under the manifest's lock, so that concurrent pulls of other selections
  // (in this process or another) keep each other's entries; a temp file of this call's own, renamed
  // over the manifest, so that readers never see half of one.
  await withFileLock(
    join(dir, `${MANIFEST}.lock`),
    async () => {
      const manifest = await readManifest(dir);
      manifest[selectionKey(ref)] = { path: entryPath, format: selection.format, files: selection.files.map((f) => f.path) };
      const temp = join(dir, `${MANIFEST}.${process.pid}.${randomUUID()}.tmp`);
      await writeFile(temp, JSON.stringify(manifest, null, 2));
      await rename(temp, join(dir, MANIFEST));
    },
    options.signal,
  );
  return { ref, path: join(dir, entryPath), format: selection.format, files };
}

export interface ResolveOptions extends PullOptions {
  /** Download references missing from the cache (default true); false throws MODEL_NOT_FOUND instead. */
  pull?: boolean;
}

/**
 * Turns a model argument into a local path: an existing file or folder as
 * is, an alias or `hf:` reference from the cache, pulling it when missing.
 */
export async function resolveModel(spec: string, options: ResolveOptions = {}): Promise<string> {
  const aliasTarget = resolveAlias(spec);
  const target = aliasTarget ?? spec;
  const ref = parseHubRef(target);
  if (!ref) {
    if (await stat(target).catch(() => undefined)) return resolve(target);
    throw new InferenceError(
      "MODEL_NOT_FOUND",
      `no model at '${target}': not a file, folder, alias or hf:org/repo reference (see \`infer ls\` for local models)`,
      { details: { path: target } },
    );
  }
  const cached = await cachedPath(ref, options);
  if (cached) return cached;
  if (options.pull === false) {
    throw new InferenceError("MODEL_NOT_FOUND", `${formatHubRef(ref)} is not in the cache; run \`infer pull ${spec}\` first`, {
      details: { ref: formatHubRef(ref) },
    });
  }
  return (await pull(ref, options)).path;
}

/**
 * Deletes a pulled repository (every selection of its revision) from the
 * cache, or a path inside the cache. Paths outside the cache are refused.
 */
export async function removeCached(spec: string, options: { cacheDir?: string } = {}): Promise<string> {
  const root = options.cacheDir ?? cacheDir();
  const ref = hubRefOf(spec);
  const target = ref ? repoDir(ref, root) : resolve(spec);
  const inside = relative(root, target);
  if (inside === "" || inside.startsWith("..") || inside.split(sep)[0] === "..") {
    throw new InferenceError("INVALID_OPTION", `'${spec}' is not in the cache (${root}); infer rm only deletes cached models`);
  }
  if (!(await stat(target).catch(() => undefined))) {
    throw new InferenceError("MODEL_NOT_FOUND", `'${spec}' is not in the cache (${root})`);
  }
  await rm(target, { recursive: true, force: true });
  return target;
}

/** The `hf:` reference a cached path belongs to, or undefined for paths outside the cache. */
export function refOfCachedPath(path: string, root = cacheDir()): string | undefined {
  const parts = relative(join(root, "hub"), path).split(sep);
  if (parts.length < 3 || parts[0] === "..") return undefined;
  const [org, name, revision, ...rest] = parts;
  const file = rest.join("/");
  return formatHubRef({ repo: `${org}/${name}`, revision: revision!, file: file.endsWith(".gguf") ? file : undefined });
}
