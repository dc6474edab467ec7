import { homedir, platform } from "node:os";
import { join, resolve } from "node:path";
import type { HubRef } from "./ref.js";

/**
 * The cache root: INFER_CACHE, else the platform's cache folder
 * (XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS,
 * LOCALAPPDATA on Windows) + "/infer".
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.INFER_CACHE) return resolve(env.INFER_CACHE);
  switch (platform()) {
    case "darwin":
      return join(homedir(), "Library", "Caches", "infer");
    case "win32":
      return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "infer", "cache");
    default:
      return join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "infer");
  }
}

/** Where a repository's files land: <cache>/hub/<org>/<name>/<revision>/. */
export function repoDir(ref: Pick<HubRef, "repo" | "revision">, root = cacheDir()): string {
  const [org, name] = ref.repo.split("/");
  return join(root, "hub", org!, name!, ref.revision.replace(/[^A-Za-z0-9._-]/g, "_"));
}
