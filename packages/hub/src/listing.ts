import { InferenceError } from "@infer/core";
import type { HubRef } from "./ref.js";

/** One file of a hub repository. */
export interface RepoFile {
  path: string;
  /** Bytes, when the hub said. */
  size?: number;
  /** sha256 of the content: the Git LFS oid. */
  sha256?: string;
  /** git blob sha1 of a small (non-LFS) file. */
  gitSha1?: string;
}

export interface HubConnection {
  /** Default HF_ENDPOINT or https://huggingface.co. */
  endpoint: string;
  /** Default HF_TOKEN. */
  token?: string;
  /** Replaces global fetch (tests, proxies). */
  fetch?: typeof fetch;
}

export function connectionFromEnv(overrides: Partial<HubConnection> = {}, env: NodeJS.ProcessEnv = process.env): HubConnection {
  return {
    endpoint: (overrides.endpoint ?? env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, ""),
    token: overrides.token ?? (env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || undefined),
    fetch: overrides.fetch,
  };
}

export function authHeaders(conn: HubConnection): Record<string, string> {
  return conn.token ? { authorization: `Bearer ${conn.token}` } : {};
}

const encodePath = (path: string) => path.split("/").map(encodeURIComponent).join("/");

export function fileUrl(conn: HubConnection, ref: Pick<HubRef, "repo" | "revision">, path: string): string {
  return `${conn.endpoint}/${ref.repo}/resolve/${encodeURIComponent(ref.revision)}/${encodePath(path)}`;
}

async function getJson(conn: HubConnection, url: string, what: string): Promise<unknown> {
  return (await getJsonPage(conn, url, what)).body;
}

/** The `rel="next"` target of a Link header (the tree API pages long listings). */
function nextLink(header: string | null): string | undefined {
  return /<([^>]+)>\s*;\s*rel="?next"?/.exec(header ?? "")?.[1];
}

async function getJsonPage(conn: HubConnection, url: string, what: string): Promise<{ body: unknown; next?: string }> {
  let res: Response;
  try {
    res = await (conn.fetch ?? fetch)(url, { headers: { accept: "application/json", ...authHeaders(conn) } });
  } catch (error) {
    throw new InferenceError("MODEL_NOT_FOUND", `could not reach the hub at ${conn.endpoint} (${(error as Error).message}); check the network or HF_ENDPOINT`, {
      cause: error,
      details: { url },
    });
  }
  if (res.status === 401 || res.status === 403) {
    throw new InferenceError("MODEL_NOT_FOUND", `the hub refused access to ${what} (HTTP ${res.status}); set HF_TOKEN to a token that can read it`, {
      details: { url, status: res.status },
    });
  }
  if (res.status === 404) {
    throw new InferenceError("MODEL_NOT_FOUND", `${what} does not exist on ${conn.endpoint}`, { details: { url, status: 404 } });
  }
  if (!res.ok) {
    throw new InferenceError("MODEL_NOT_FOUND", `the hub answered HTTP ${res.status} for ${what}`, { details: { url, status: res.status } });
  }
  try {
    return { body: await res.json(), next: nextLink(res.headers.get("link")) };
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `the hub's answer for ${what} is not JSON`, { cause: error, details: { url } });
  }
}

/**
 * Lists a repository's files with sizes and hashes through the tree API
 * (`/api/models/{repo}/tree/{revision}?recursive=true`); when a hub lacks it,
 * falls back to the model API's `siblings` (names only).
 */
export async function listRepoFiles(conn: HubConnection, ref: Pick<HubRef, "repo" | "revision">): Promise<RepoFile[]> {
  const what = `repository ${ref.repo}@${ref.revision}`;
  const treeUrl = `${conn.endpoint}/api/models/${ref.repo}/tree/${encodeURIComponent(ref.revision)}?recursive=true`;
  let tree: unknown[] = [];
  try {
    // Follow the pages of long listings; the cap only guards against a hub that links in circles.
    for (let url: string | undefined = treeUrl, pages = 0; url && pages < 1000; pages++) {
      const page = await getJsonPage(conn, url, what);
      if (!Array.isArray(page.body)) throw new InferenceError("MODEL_FORMAT", `the hub's tree of ${what} is not an array`);
      tree = tree.concat(page.body);
      url = page.next;
    }
  } catch (error) {
    if (!(error instanceof InferenceError) || error.details.status !== 404) throw error;
    const info = (await getJson(conn, `${conn.endpoint}/api/models/${ref.repo}/revision/${encodeURIComponent(ref.revision)}`, what).catch(
      () => getJson(conn, `${conn.endpoint}/api/models/${ref.repo}`, what),
    )) as { siblings?: Array<{ rfilename?: unknown }> };
    if (!Array.isArray(info?.siblings)) throw new InferenceError("MODEL_FORMAT", `the hub's listing of ${what} has no 'siblings'`);
    return info.siblings.filter((s) => typeof s.rfilename === "string").map((s) => ({ path: s.rfilename as string }));
  }
  const files: RepoFile[] = [];
  for (const entry of tree as Array<Record<string, unknown>>) {
    if (entry?.type !== "file" || typeof entry.path !== "string") continue;
    const lfs = entry.lfs as { oid?: unknown; size?: unknown } | undefined;
    const size = typeof lfs?.size === "number" ? lfs.size : typeof entry.size === "number" ? entry.size : undefined;
    const sha256 = typeof lfs?.oid === "string" && /^[0-9a-f]{64}$/.test(lfs.oid) ? lfs.oid : undefined;
    const gitSha1 = !lfs && typeof entry.oid === "string" && /^[0-9a-f]{40}$/.test(entry.oid) ? entry.oid : undefined;
    files.push({ path: entry.path, size, sha256, gitSha1 });
  }
  return files;
}
