// A small static file server on 127.0.0.1 for browser tests: cross-origin isolation headers that
// can be switched off, HTTP Range, and a way to cut a download mid-way.
import { createReadStream, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize, sep } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm",
  ".txt": "text/plain; charset=utf-8",
};

/** The file under the longest matching mount for a URL path, or undefined when it escapes the mount. */
function resolvePath(mounts, urlPath) {
  const prefix = Object.keys(mounts)
    .filter((p) => urlPath.startsWith(p))
    .sort((a, b) => b.length - a.length)[0];
  if (prefix === undefined) return undefined;
  const base = normalize(mounts[prefix]);
  const file = normalize(join(base, decodeURIComponent(urlPath.slice(prefix.length))));
  return file === base || file.startsWith(base.endsWith(sep) ? base : base + sep) ? file : undefined;
}

/** [start, end] (inclusive) of a single "bytes=" range within size, null when unsatisfiable. */
function parseRange(header, size) {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === "" && match[2] === "")) return null;
  let start;
  let end;
  if (match[1] === "") {
    start = Math.max(0, size - Number(match[2]));
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  return start <= end && start < size ? [start, end] : null;
}

/**
 * Starts a server. Options:
 *   root      folder served at "/" (default: none)
 *   mounts    { "/url/prefix/": "/folder" } served besides root (the longest prefix wins)
 *   isolated  send COOP same-origin + COEP require-corp (default true), so pages are crossOriginIsolated
 *   port      0 (default) picks a free port
 * Resolves to { origin: "http://127.0.0.1:PORT", requests, close() }: `requests` logs
 * { path, range, status } per request, so a test can assert that a resume asked for a Range.
 * A query `?cut=N` on a file answers a request without a Range header with the full length announced
 * but closes the connection after N bytes: an interrupted download.
 */
export async function serve({ root, mounts = {}, isolated = true, port = 0 } = {}) {
  const all = { ...mounts, ...(root === undefined ? {} : { "/": root }) };
  const requests = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const entry = { path: url.pathname, range: req.headers.range, status: 0 };
    requests.push(entry);
    const reply = (status, headers = {}) => {
      entry.status = status;
      res.writeHead(status, {
        ...(isolated ? { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" } : {}),
        "Cache-Control": "no-store",
        ...headers,
      });
    };
    let file = resolvePath(all, url.pathname);
    let stats;
    try {
      stats = file === undefined ? undefined : statSync(file);
      if (stats?.isDirectory()) {
        file = join(file, "index.html");
        stats = statSync(file);
      }
    } catch {
      stats = undefined;
    }
    if (req.method !== "GET" && req.method !== "HEAD") return reply(405), res.end();
    if (file === undefined || stats === undefined) return reply(404, { "Content-Type": "text/plain" }), res.end("not found");
    const type = TYPES[extname(file)] ?? "application/octet-stream";
    const size = stats.size;
    const common = { "Content-Type": type, "Accept-Ranges": "bytes" };
    let start = 0;
    let end = size - 1;
    if (req.headers.range) {
      const range = parseRange(req.headers.range, size);
      if (range === null) return reply(416, { "Content-Range": `bytes */${size}` }), res.end();
      [start, end] = range;
      reply(206, { ...common, "Content-Length": String(end - start + 1), "Content-Range": `bytes ${start}-${end}/${size}` });
    } else {
      reply(200, { ...common, "Content-Length": String(size) });
    }
    if (req.method === "HEAD" || size === 0) return res.end();
    const cut = url.searchParams.get("cut");
    if (cut !== null && !req.headers.range) {
      // Announce the whole file, send a prefix, then drop the connection.
      const stream = createReadStream(file, { start: 0, end: Math.max(0, Number(cut) - 1) });
      stream.on("data", (chunk) => res.write(chunk));
      stream.on("end", () => res.socket?.destroy());
      return;
    }
    createReadStream(file, { start, end }).pipe(res);
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  const address = server.address();
  return {
    origin: `http://127.0.0.1:${address.port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
