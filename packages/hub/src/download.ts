import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readFile, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { abortedError, InferenceError } from "@infer/core";

export interface DownloadProgress {
  /** The file being downloaded (its repository path or name). */
  file: string;
  /** Bytes on disk for this file so far, resumed bytes included. */
  received: number;
  /** Total bytes, when known. */
  total?: number;
  /** Bytes that came from an earlier, interrupted transfer. */
  resumedFrom: number;
  /** Transfer rate of this run in bytes per second. */
  bytesPerSec: number;
}

export interface DownloadRequest {
  url: string;
  /** Final path; the transfer goes to `<dest>.part` and is renamed when verified. */
  dest: string;
  /** Label in progress events. */
  label?: string;
  size?: number;
  /** Expected sha256 (the LFS oid). */
  sha256?: string;
  /** Expected git blob sha1 (small non-LFS files; needs `size`). */
  gitSha1?: string;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress) => void;
  /** Extra attempts after a dropped connection; each resumes where the last stopped (default 3). */
  retries?: number;
}

export interface DownloadResult {
  path: string;
  /** Bytes fetched over the network by this call. */
  fetched: number;
  /** True when the file was already complete in the cache. */
  cached: boolean;
  /** Offsets at which a transfer resumed from a partial file. */
  resumedAt: number[];
}

const LOCK_POLL_MS = 100;

/**
 * Downloads one file: to `<dest>.part`, resuming with an HTTP Range request
 * when a partial file exists, verifying size and hash, then renaming into
 * place. A `<dest>.lock` file (holding the owner's pid) keeps two processes
 * from writing the same part file; a lock whose process is gone is taken over.
 */
export async function downloadFile(request: DownloadRequest): Promise<DownloadResult> {
  const { dest } = request;
  await mkdir(dirname(dest), { recursive: true });
  const cached: DownloadResult = { path: dest, fetched: 0, cached: true, resumedAt: [] };
  if (await isComplete(dest, request.size)) return cached;
  return withFileLock(
    `${dest}.lock`,
    // Another process may have finished while this one waited for the lock.
    async () => ((await isComplete(dest, request.size)) ? cached : transfer(request)),
    request.signal,
  );
}

async function isComplete(path: string, size: number | undefined): Promise<boolean> {
  try {
    const info = await stat(path);
    return info.isFile() && (size === undefined || info.size === size);
  } catch {
    return false;
  }
}

/**
 * Runs `work` while holding the lock file at `path` (the pid-holding kind downloadFile uses),
 * waiting for another holder, in this process or another, to let go first.
 */
export async function withFileLock<T>(path: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  for (;;) {
    const lock = await tryLock(path);
    if (!lock) {
      await waitForLock(path, signal);
      continue;
    }
    try {
      return await work();
    } finally {
      await lock.close();
      await rm(path, { force: true });
    }
  }
}

async function tryLock(path: string): Promise<FileHandle | undefined> {
  try {
    const handle = await open(path, "wx");
    await handle.write(String(process.pid));
    return handle;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    if (await isStale(path)) {
      await rm(path, { force: true });
      return tryLock(path);
    }
    return undefined;
  }
}

/** A lock is stale when the pid written in it no longer runs. */
async function isStale(path: string): Promise<boolean> {
  const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
  if (!Number.isInteger(pid) || pid <= 0) return false; // being written right now
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

async function waitForLock(path: string, signal?: AbortSignal): Promise<void> {
  for (;;) {
    if (signal?.aborted) throw abortedError(signal.reason);
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
    try {
      await stat(path);
      if (await isStale(path)) return;
    } catch {
      return;
    }
  }
}

function newHash(request: DownloadRequest): Hash | undefined {
  if (request.sha256) return createHash("sha256");
  if (request.gitSha1 && request.size !== undefined) return createHash("sha1").update(`blob ${request.size}\0`);
  return undefined;
}

async function hashExisting(hash: Hash | undefined, path: string): Promise<void> {
  if (!hash) return;
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

async function transfer(request: DownloadRequest): Promise<DownloadResult> {
  const part = `${request.dest}.part`;
  const label = request.label ?? request.dest;
  const resumedAt: number[] = [];
  let fetched = 0;
  const attempts = 1 + (request.retries ?? 3);
  for (let attempt = 1; ; attempt++) {
    let offset = (await stat(part).catch(() => undefined))?.size ?? 0;
    if (request.size !== undefined && offset > request.size) {
      await rm(part, { force: true });
      offset = 0;
    }
    const headers: Record<string, string> = { ...request.headers };
    if (offset > 0) headers.range = `bytes=${offset}-`;
    const res = await (request.fetch ?? fetch)(request.url, { headers, signal: request.signal, redirect: "follow" }).catch((error: unknown) => {
      if (request.signal?.aborted) throw abortedError(request.signal.reason);
      throw new InferenceError("MODEL_NOT_FOUND", `could not download ${label}: ${(error as Error).message}`, { cause: error });
    });
    if (res.status === 416 && offset > 0 && (request.size === undefined || offset === request.size)) {
      // The part file already holds everything.
      await verifyAndPlace(request, part, label);
      return { path: request.dest, fetched, cached: false, resumedAt };
    }
    if (!res.ok || !res.body) throw httpFailure(res.status, label, request.url);
    const resuming = res.status === 206;
    if (resuming && !contentRangeStartsAt(res.headers.get("content-range"), offset)) {
      await res.body.cancel();
      throw new InferenceError("MODEL_FORMAT", `the hub resumed ${label} at the wrong offset (${res.headers.get("content-range")})`);
    }
    if (!resuming) offset = 0;
    if (resuming) resumedAt.push(offset);
    const hash = newHash(request);
    if (resuming) await hashExisting(hash, part);
    const total = request.size ?? totalFrom(res, offset);
    const file = await open(part, resuming ? "a" : "w");
    const started = performance.now();
    let received = offset;
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        await file.write(chunk);
        hash?.update(chunk);
        received += chunk.length;
        fetched += chunk.length;
        const seconds = (performance.now() - started) / 1000;
        request.onProgress?.({ file: label, received, total, resumedFrom: offset, bytesPerSec: seconds > 0 ? (received - offset) / seconds : 0 });
      }
    } catch (error) {
      await file.close();
      if (request.signal?.aborted) throw abortedError(request.signal.reason);
      if (attempt < attempts) continue; // resume from what reached the disk
      throw new InferenceError("MODEL_NOT_FOUND", `the download of ${label} broke off after ${received} bytes (${(error as Error).message}); run the command again to resume`, {
        cause: error,
      });
    }
    await file.close();
    if (total !== undefined && received < total && attempt < attempts) continue;
    await verifyAndPlace(request, part, label, hash);
    return { path: request.dest, fetched, cached: false, resumedAt };
  }
}

async function verifyAndPlace(request: DownloadRequest, part: string, label: string, hash?: Hash): Promise<void> {
  const size = (await stat(part)).size;
  if (request.size !== undefined && size !== request.size) {
    throw new InferenceError("MODEL_FORMAT", `${label}: got ${size} bytes, the hub lists ${request.size}; run the command again to resume`);
  }
  if (!hash) {
    hash = newHash(request);
    await hashExisting(hash, part);
  }
  const expected = request.sha256 ?? request.gitSha1;
  if (hash && expected) {
    const actual = hash.digest("hex");
    if (actual !== expected) {
      await rm(part, { force: true });
      throw new InferenceError("MODEL_FORMAT", `${label} is corrupt: ${request.sha256 ? "sha256" : "git sha1"} ${actual}, expected ${expected}; the partial file was deleted, run the command again`, {
        details: { expected, actual },
      });
    }
  }
  await rename(part, request.dest);
}

function contentRangeStartsAt(header: string | null, offset: number): boolean {
  const match = /^bytes (\d+)-/.exec(header ?? "");
  return match !== null && Number(match[1]) === offset;
}

function totalFrom(res: Response, offset: number): number | undefined {
  const range = /\/(\d+)$/.exec(res.headers.get("content-range") ?? "");
  if (range) return Number(range[1]);
  const length = Number(res.headers.get("content-length"));
  return Number.isFinite(length) && length > 0 ? offset + length : undefined;
}

function httpFailure(status: number, label: string, url: string): InferenceError {
  const hint =
    status === 401 || status === 403 ? "; set HF_TOKEN to a token that can read this repository" : status === 404 ? "; check the repository and file name" : "";
  return new InferenceError("MODEL_NOT_FOUND", `could not download ${label}: HTTP ${status}${hint}`, { details: { url, status } });
}
