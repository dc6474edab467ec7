import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A file of a fake hub repository; big files are served as Git LFS objects (sha256 oid). */
export interface HubFile {
  path: string;
  content: Buffer;
  lfs?: boolean;
  /** Serve these bytes instead of `content` (corruption tests); the listing still describes `content`. */
  servedContent?: Buffer;
}

export interface HubRequestLog {
  url: string;
  range?: string;
  authorization?: string;
}

/**
 * A Hugging Face compatible hub on 127.0.0.1 for tests: the tree and model
 * APIs and `resolve` downloads with Range support. It can drop a connection
 * half-way through a file once, and can demand a token.
 */
export class LocalHub {
  readonly requests: HubRequestLog[] = [];
  /** Repository path of a file whose first full transfer is cut off half-way. */
  dropOnce: string | undefined;
  /**
   * What the cut waits for once the half is sent (the client having written it, say). A stream that errors
   * drops the chunks its reader has not taken yet, so on a busy machine a fixed delay could cut before the
   * client saw any of the half, and the transfer would restart instead of resuming.
   */
  dropAfter: (() => Promise<void>) | undefined;
  requiredToken: string | undefined;
  /** Tree entries per page. */
  pageSize = 1000;
  private server: Server | undefined;

  constructor(private readonly repos: Record<string, HubFile[]>) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      this.requests.push({ url: url.pathname, range: req.headers.range, authorization: req.headers.authorization });
      if (this.requiredToken && req.headers.authorization !== `Bearer ${this.requiredToken}`) {
        res.writeHead(401).end("unauthorized");
        return;
      }
      const tree = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(url.pathname);
      if (tree) {
        const files = this.repos[tree[1]!];
        if (!files) return void res.writeHead(404).end("{}");
        // Pages of `pageSize` entries linked like the real hub's (Link: <...>; rel="next").
        const start = Number(url.searchParams.get("cursor") ?? 0);
        const end = start + this.pageSize;
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (end < files.length) headers.link = `<http://${req.headers.host}${url.pathname}?recursive=true&cursor=${end}>; rel="next"`;
        res.writeHead(200, headers);
        res.end(JSON.stringify(files.slice(start, end).map(describe)));
        return;
      }
      const file = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
      const found = file && this.repos[file[1]!]?.find((f) => f.path === decodeURIComponent(file[3]!));
      if (!found) return void res.writeHead(404).end("not found");
      const body = found.servedContent ?? found.content;
      const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
      if (range) {
        const start = Number(range[1]);
        if (start >= body.length) return void res.writeHead(416, { "content-range": `bytes */${body.length}` }).end();
        res.writeHead(206, { "content-length": body.length - start, "content-range": `bytes ${start}-${body.length - 1}/${body.length}` });
        res.end(body.subarray(start));
        return;
      }
      res.writeHead(200, { "content-length": body.length });
      if (this.dropOnce === found.path) {
        this.dropOnce = undefined;
        // Send half, then cut the connection as a flaky network would.
        const settled = this.dropAfter?.() ?? new Promise((resolve) => setTimeout(resolve, 20));
        res.write(body.subarray(0, body.length >> 1), () => void settled.then(() => res.socket?.destroy()));
        return;
      }
      res.end(body);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  downloads(path: string): HubRequestLog[] {
    return this.requests.filter((r) => r.url.includes("/resolve/") && r.url.endsWith(`/${path}`));
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server?.close(() => resolve());
      this.server?.closeAllConnections();
    });
  }
}

function describe(file: HubFile) {
  if (file.lfs) {
    const oid = createHash("sha256").update(file.content).digest("hex");
    return { type: "file", path: file.path, size: file.content.length, oid: "0".repeat(40), lfs: { oid, size: file.content.length, pointerSize: 134 } };
  }
  const oid = createHash("sha1").update(`blob ${file.content.length}\0`).update(file.content).digest("hex");
  return { type: "file", path: file.path, size: file.content.length, oid };
}

/** Deterministic pseudo-random bytes (a GGUF magic first, so it looks the part). */
export function fakeWeights(size: number, seed: number): Buffer {
  const buf = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
  buf.write("GGUF", 0, "latin1");
  return buf;
}
