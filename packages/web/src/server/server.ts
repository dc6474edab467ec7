import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, join, resolve, sep } from "node:path";
import { InferenceError } from "@infer/core";
import { SERVED_MODELS_PATH, type ServedModel, type ServedModelList } from "../app/served-models.js";
import { contentTypeOf, ISOLATION_HEADERS } from "./headers.js";
import { parseRange } from "./ranges.js";

export interface WebServerOptions {
  /** The built app's folder (index.html and its assets). */
  appDir: string;
  /** Local model files the app offers; each must exist and be a file. */
  models?: string[];
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8080; 0 picks a free port. */
  port?: number;
}

export interface WebServer {
  /** http://host:port/ */
  url: string;
  models: ServedModel[];
  close(): Promise<void>;
}

interface ModelFile extends ServedModel {
  path: string;
}

/** Checks each model path before anything listens: a missing file or a folder is refused, naming it. */
async function modelFiles(paths: string[]): Promise<ModelFile[]> {
  const files: ModelFile[] = [];
  for (const [index, path] of paths.entries()) {
    const info = await stat(path).catch(() => undefined);
    if (!info) throw new InferenceError("MODEL_NOT_FOUND", `model file '${path}' does not exist`, { details: { path } });
    if (!info.isFile()) throw new InferenceError("INVALID_OPTION", `'${path}' is not a file: the web app loads single model files (GGUF)`, { details: { path } });
    const name = basename(path);
    // The index keeps two files of one name apart.
    files.push({ name, url: `models/${index}/${encodeURIComponent(name)}`, sizeBytes: info.size, path: resolve(path) });
  }
  return files;
}

/** Sends a file, or the byte range the request asks for (downloads resume with Range). */
async function sendFile(req: IncomingMessage, res: ServerResponse, path: string, cacheControl: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) return sendText(res, 404, "not found");
  const range = parseRange(req.headers.range, info.size);
  const headers: Record<string, string | number> = {
    ...ISOLATION_HEADERS,
    "content-type": contentTypeOf(path),
    "accept-ranges": "bytes",
    "cache-control": cacheControl,
    "last-modified": info.mtime.toUTCString(),
  };
  if (range === "unsatisfiable") {
    res.writeHead(416, { ...headers, "content-range": `bytes */${info.size}` });
    res.end();
    return;
  }
  const { start, end } = range ?? { start: 0, end: info.size - 1 };
  headers["content-length"] = Math.max(0, end - start + 1);
  if (range) headers["content-range"] = `bytes ${start}-${end}/${info.size}`;
  res.writeHead(range ? 206 : 200, headers);
  if (req.method === "HEAD" || info.size === 0) {
    res.end();
    return;
  }
  const stream = createReadStream(path, { start, end });
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
}

function sendText(res: ServerResponse, status: number, text: string, type = "text/plain; charset=utf-8"): void {
  res.writeHead(status, { ...ISOLATION_HEADERS, "content-type": type, "content-length": Buffer.byteLength(text), "cache-control": "no-cache" });
  res.end(text);
}

/** A path of the app's folder for a request path, or undefined for one that would leave it. */
function appFile(appDir: string, pathname: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return undefined;
  }
  const file = resolve(appDir, `.${decoded.endsWith("/") ? `${decoded}index.html` : decoded}`);
  return file.startsWith(appDir + sep) ? file : undefined;
}

/**
 * Serves the chat app's static files and the given model files (with Range) on one origin,
 * every response cross-origin isolated (see ISOLATION_HEADERS); `models.json` lists the models.
 */
export async function startWebServer(options: WebServerOptions): Promise<WebServer> {
  const appDir = resolve(options.appDir);
  if (!(await stat(join(appDir, "index.html")).catch(() => undefined))) {
    throw new InferenceError("IO", `the web app is not built (no index.html in ${appDir}); run \`npm run build\``, { details: { path: appDir } });
  }
  const models = await modelFiles(options.models ?? []);
  const list: ServedModelList = { models: models.map(({ name, url, sizeBytes }) => ({ name, url, sizeBytes })) };
  const byUrl = new Map(models.map((m) => [`/${m.url}`, m.path]));

  const server = createServer((req, res) => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      return sendText(res, 405, "method not allowed");
    }
    const pathname = new URL(req.url ?? "/", "http://localhost").pathname;
    if (pathname === `/${SERVED_MODELS_PATH}`) return sendText(res, 200, JSON.stringify(list), contentTypeOf(SERVED_MODELS_PATH));
    const model = byUrl.get(pathname);
    // The app's files change with each build; a model file does not while it is served.
    const target = model ?? appFile(appDir, pathname);
    if (!target) return sendText(res, 404, "not found");
    sendFile(req, res, target, model ? "no-store" : "no-cache").catch(() => res.destroy());
  });
  const port = options.port ?? 8080;
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      ok();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}/`,
    models: list.models,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}
