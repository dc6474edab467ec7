/**
 * What every response of the app's server carries. COOP and COEP make the page cross-origin
 * isolated, which the engine needs for threads (a SharedArrayBuffer-backed memory shared with
 * its workers); under COEP require-corp every subresource must allow being embedded, so ours
 * say CORP same-origin. Cross-origin model downloads (the hub) are CORS requests, which COEP
 * lets through.
 */
export const ISOLATION_HEADERS: Readonly<Record<string, string>> = {
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-embedder-policy": "require-corp",
  "cross-origin-resource-policy": "same-origin",
  "x-content-type-options": "nosniff",
};

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
};

/** The Content-Type for a file name; model files and anything unknown are plain bytes. */
export function contentTypeOf(name: string): string {
  const dot = name.lastIndexOf(".");
  return (dot >= 0 && CONTENT_TYPES[name.slice(dot).toLowerCase()]) || "application/octet-stream";
}
