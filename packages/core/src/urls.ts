import type { ModelFormat } from "./types.js";

/**
 * How `loadModel` reads a model reference that is an http(s) URL rather than a path. Two kinds
 * name a model: a server's base URL — no path at all, or one ending in `/v1` (`http://host:8080`,
 * `https://api.example.com/v1`, `http://gateway/team/v1`) — served by the `remote` backend as
 * format "remote"; and anything else, a model file or folder (`https://host/x.gguf`, a Hugging
 * Face `.../resolve/main/` folder, `http://127.0.0.1/models/m/`), which a backend that fetches
 * files reads. The rule is by shape alone, so no request is made to tell them apart.
 */

/** True for an absolute http: or https: URL. */
export function isHttpUrl(reference: string): boolean {
  return parsedHttpUrl(reference) !== undefined;
}

/** True for an http(s) URL that names a serving endpoint (what backend `remote` loads). */
export function isServerUrl(reference: string): boolean {
  const url = parsedHttpUrl(reference);
  if (!url || url.search !== "" || url.hash !== "") return false;
  const path = url.pathname.replace(/\/+$/, "");
  return path === "" || /\/v1$/i.test(path);
}

/** True for an http(s) URL that names a model file or folder, not a server. */
export function isModelFileUrl(reference: string): boolean {
  return isHttpUrl(reference) && !isServerUrl(reference);
}

/** The format a URL reference names, or undefined when `reference` is no http(s) URL. */
export function urlFormat(reference: string): ModelFormat | undefined {
  if (!isHttpUrl(reference)) return undefined;
  return isServerUrl(reference) ? "remote" : "unknown";
}

function parsedHttpUrl(reference: string): URL | undefined {
  if (typeof reference !== "string" || !/^https?:\/\//i.test(reference)) return undefined;
  try {
    const url = new URL(reference);
    return url.hostname.length > 0 ? url : undefined;
  } catch {
    return undefined;
  }
}
