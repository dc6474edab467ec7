import type { ModelFormat } from "./types.js";

/**
 * How `loadModel` reads a model reference that is a URL rather than a path.
 * Two kinds of http(s) URL name a model: a server's base URL
 * (`http://host:8080`, `https://api.example.com/v1`), served by the `remote`
 * backend as format "remote"; and a model FILE (`https://host/x.gguf`, a
 * Hugging Face `.../resolve/main/...` link), which a backend that fetches
 * files reads. The file extensions and the `resolve/` path tell them apart.
 */

const MODEL_FILE_SUFFIXES = [".gguf", ".safetensors", ".bin", ".json"];

/** True for an absolute http: or https: URL. */
export function isHttpUrl(reference: string): boolean {
  return parsedHttpUrl(reference) !== undefined;
}

/** True for an http(s) URL that names a model file (by its extension or a `/resolve/` path), not a server. */
export function isModelFileUrl(reference: string): boolean {
  const url = parsedHttpUrl(reference);
  if (!url) return false;
  const path = url.pathname.toLowerCase();
  return MODEL_FILE_SUFFIXES.some((suffix) => path.endsWith(suffix)) || path.includes("/resolve/");
}

/** True for an http(s) URL that names a serving endpoint (what backend `remote` loads). */
export function isServerUrl(reference: string): boolean {
  return isHttpUrl(reference) && !isModelFileUrl(reference);
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
