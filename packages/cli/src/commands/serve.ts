import { basename } from "node:path";
import { createService, isServerUrl, type LoadOptions, servedModel, type ServiceEntry, type TextModel } from "@infer/core";
import { loadReplicas } from "@infer/remote";
import { createServer } from "@infer/server";
import { type Command, numberFlag, stringFlag, usageError } from "../command.js";
import { untilStopped } from "../io.js";
import { chatTemplateOf, ISOLATE_FLAG, LOAD_FLAGS, loadOptionsOf, openModel, SAMPLING_FLAGS } from "../models.js";

/** The name clients use: `name=spec` names it explicitly, else the alias, repo or file stem. */
export function servedName(arg: string): { name: string; spec: string } {
  const eq = arg.indexOf("=");
  if (eq > 0 && !arg.slice(0, eq).includes("/") && !arg.startsWith("hf:")) return { name: arg.slice(0, eq), spec: arg.slice(eq + 1) };
  if (arg.startsWith("hf:")) return { name: arg.slice(3), spec: arg };
  if (isServerUrl(arg.split(",")[0]!)) throw usageError(`name the model behind ${arg}: NAME=${arg}`, "serve");
  if (arg.includes("/") || arg.includes("\\") || arg.endsWith(".gguf")) return { name: basename(arg).replace(/\.gguf$/i, ""), spec: arg };
  return { name: arg, spec: arg };
}

export const serveCommand: Command = {
  name: "serve",
  usage: "<model>... [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-loaded-mb N] [--idle-unload S]",
  summary: "Serves models over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /health, /metrics).",
  details: [
    "Each model is served under a name: its alias, its repository (hf:org/repo -> org/repo), its file name without .gguf, or NAME=<model>.",
    "A server URL (NAME=http://host:8000/v1) serves that server's model through backend remote; several URLs",
    "separated by commas (NAME=http://a:8000/v1,http://b:8000/v1) are replicas of one model: each request goes to",
    "the healthy one with the fewest requests in flight, and health checks take a failing one out and back in.",
    "Local models load at start; with --max-loaded-mb or --idle-unload, idle ones are unloaded and load again on use.",
    "Example: infer serve tiny=./stories260K.gguf big=http://gpu-box:8000/v1 --port 8080",
  ].join("\n"),
  options: {
    ...LOAD_FLAGS,
    ...ISOLATE_FLAG,
    host: { type: "string", value: "address", description: "address to listen on (default 127.0.0.1)" },
    port: { type: "string", short: "p", value: "port", description: "port (default 8080; 0 picks a free one)" },
    "api-key": { type: "string", value: "key", description: "require Authorization: Bearer <key> (default: INFER_API_KEY if set)" },
    "max-queue": { type: "string", value: "n", description: "requests that may wait per model before 429 (default 64)" },
    parallel: { type: "string", value: "n", description: "generations per model at once (default 1)" },
    "max-batch": { type: "string", value: "n", description: "non-streaming completions decoded together (default 8; 1 = off)" },
    "chat-template": SAMPLING_FLAGS["chat-template"]!,
    "max-loaded-mb": { type: "string", value: "MiB", description: "unload idle local models, least recently used first, to keep the loaded ones under this (default: no limit)" },
    "idle-unload": { type: "string", value: "seconds", description: "unload a model this long after its last request (default: never)" },
  },
  async run(ctx) {
    if (ctx.positionals.length === 0) throw usageError("missing <model>", "serve");
    const { io } = ctx;
    // Every flag is checked before the first model loads: a typo should not cost a load.
    const port = numberFlag(ctx.values, "port", "serve", true, 0, 65535) ?? 8080;
    const host = stringFlag(ctx.values, "host") ?? "127.0.0.1";
    const maxQueue = numberFlag(ctx.values, "max-queue", "serve", true, 0);
    const parallel = numberFlag(ctx.values, "parallel", "serve", true, 1);
    const maxBatch = numberFlag(ctx.values, "max-batch", "serve", true, 1);
    const loadOptions = loadOptionsOf(ctx, "serve");
    const maxLoadedMb = numberFlag(ctx.values, "max-loaded-mb", "serve", false, 0);
    const idleUnloadS = numberFlag(ctx.values, "idle-unload", "serve", false, 0);
    const chatTemplate = await chatTemplateOf(ctx);
    const entries: Record<string, ServiceEntry> = {};
    for (const arg of ctx.positionals) {
      const { name, spec } = servedName(arg);
      if (entries[name]) throw usageError(`two models would be served as '${name}'; name them with NAME=<model>`, "serve");
      entries[name] = entryOf(spec, (path) => openModel(path, io, loadOptions, ctx.values.verbose === true).then((opened) => opened.model), loadOptions);
    }
    const service = createService({
      models: entries,
      maxLoadedBytes: maxLoadedMb === undefined ? undefined : maxLoadedMb * 1024 * 1024,
      idleUnloadMs: idleUnloadS === undefined ? undefined : idleUnloadS * 1000,
    });
    try {
      const models: Record<string, TextModel> = {};
      // Loading each model once at start fails fast on a bad path and gives the server each model's shape.
      for (const name of service.names) models[name] = await servedModel(service, name);
      const server = createServer({
        models,
        service,
        apiKey: stringFlag(ctx.values, "api-key") ?? (io.env.INFER_API_KEY || undefined),
        maxQueue,
        parallel,
        maxBatch,
        chatTemplates: chatTemplate === undefined ? undefined : Object.fromEntries(Object.keys(models).map((name) => [name, chatTemplate])),
        log: ctx.values.verbose === true ? (line) => io.stderr.write(`${line}\n`) : undefined,
      });
      const address = await server.listen(port, host).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "EADDRINUSE" || error.code === "EACCES" || error.code === "EADDRNOTAVAIL") {
          throw usageError(`cannot listen on ${host}:${port} (${error.code}); pick another --port or --host`, "serve");
        }
        throw error;
      });
      io.stderr.write(`infer: serving ${Object.keys(models).join(", ")} at ${address.url}/v1 (Ctrl-C stops)\n`);
      await untilStopped(io);
      io.stderr.write("infer: shutting down\n");
      await server.close();
      return 0;
    } finally {
      await service.close();
    }
  },
};

/** A comma-separated list of server URLs is one remote model's replicas; anything else opens as a local model. */
function entryOf(spec: string, open: (path: string) => Promise<TextModel>, loadOptions: LoadOptions): ServiceEntry {
  const urls = spec.split(",");
  if (!urls.every((url) => isServerUrl(url))) return { load: () => open(spec) };
  // The local-runtime flags (threads, context, ...) belong to the servers' own command lines.
  return { load: () => loadReplicas(urls, { backend: "remote", remote: loadOptions.remote }) };
}
