/**
 * The contract round-trips through our own server: `infer serve`'s
 * createServer over a local model, and backend remote as its client, pass the
 * conformance suite like the local model does. Server and local backends come
 * from their build output (test-only links: this package depends on core only).
 */
import { existsSync } from "node:fs";
import { after } from "node:test";
import { fileURLToPath } from "node:url";
import type { Backend, TextModel } from "@infer/core";
import { runConformanceSuite } from "@infer/core/testing";
import { loadRemoteModel, remoteBackend } from "../src/index.js";
import { skipWithoutStories, STORIES_GGUF } from "./llama-server.js";

interface InferServer {
  listen(port?: number, host?: string): Promise<{ url: string }>;
  close(): Promise<void>;
}
type CreateServer = (options: { models: Record<string, TextModel>; chatTemplates?: Record<string, string> }) => InferServer;

const built = (pkg: string) => new URL(`../../../${pkg}/dist/bundle/index.js`, import.meta.url);
const missing = (...pkgs: string[]) => {
  const absent = pkgs.map(built).filter((url) => !existsSync(fileURLToPath(url)));
  return absent.length ? `needs the build of ${absent.map((url) => fileURLToPath(url)).join(", ")}` : undefined;
};

/** stories260K has no chat template; the server is given a plain one. */
const STORY_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Serves `backend`'s stories260K with createServer and connects backend remote to it. */
async function throughServer(backendPackage: string, backendExport: string): Promise<TextModel> {
  const { createServer } = (await import(built("server").href)) as { createServer: CreateServer };
  const backend = ((await import(built(backendPackage).href)) as Record<string, Backend>)[backendExport]!;
  const local = await backend.loadModel(STORIES_GGUF, { threads: 1 });
  cleanups.push(() => local.close());
  const server = createServer({ models: { stories: local }, chatTemplates: { stories: STORY_TEMPLATE } });
  cleanups.push(() => server.close());
  const { url } = await server.listen(0, "127.0.0.1");
  return loadRemoteModel(`${url}/v1`);
}

for (const [pkg, exported, name] of [
  ["wasm", "wasmBackend", "wasm"],
  ["llama-cpp", "llamaCppBackend", "llama_cpp"],
] as const) {
  runConformanceSuite({
    name: `remote through infer serve (${name} stories260K.gguf)`,
    load: () => throughServer(pkg, exported),
    backend: remoteBackend,
    skip: skipWithoutStories ?? missing("server", pkg),
    chatMessages: [{ role: "user", content: "Once upon a time" }],
    // The server returns at most 20 alternatives per token, not the whole vocabulary.
    classifyLogits: false,
  });
}
