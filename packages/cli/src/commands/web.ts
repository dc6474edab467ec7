import { InferenceError } from "@infer/core";
import { detectFormat } from "@infer/core/node";
import { serveWebApp } from "@infer/web";
import { type Command, numberFlag, stringFlag, usageError } from "../command.js";
import { untilStopped } from "../io.js";
import { localPath } from "../models.js";

export const webCommand: Command = {
  name: "web",
  usage: "[model ...] [--port 8080] [--host 127.0.0.1]",
  summary: "Serves the web chat app, which runs models in the browser, with the given GGUF models ready to pick.",
  details: [
    "The page is cross-origin isolated (COOP/COEP headers), so the engine runs with threads; the models are",
    "served with HTTP Range support. A <model> is a .gguf file, an alias or an hf: reference (pulled first).",
    "Example: infer web ./stories260K.gguf --port 8080, then open http://127.0.0.1:8080/",
  ].join("\n"),
  options: {
    host: { type: "string", value: "address", description: "address to listen on (default 127.0.0.1)" },
    port: { type: "string", short: "p", value: "port", description: "port (default 8080; 0 picks a free one)" },
  },
  async run(ctx) {
    const { io } = ctx;
    // Flags first: a typo should not cost a download.
    const port = numberFlag(ctx.values, "port", "web", true, 0, 65535) ?? 8080;
    const host = stringFlag(ctx.values, "host") ?? "127.0.0.1";
    const models: string[] = [];
    for (const spec of ctx.positionals) {
      const path = await localPath(spec, io);
      const format = await detectFormat(path);
      if (format !== "gguf") {
        throw new InferenceError("MODEL_FORMAT", `'${spec}' is not a GGUF file (${format === "unknown" ? "no GGUF magic" : `a ${format} model`}); the web app loads GGUF files`, {
          details: { path },
        });
      }
      models.push(path);
    }
    const server = await serveWebApp({ models, host, port }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE" || error.code === "EACCES" || error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND") {
        throw usageError(`cannot listen on ${host}:${port} (${error.code}); pick another --port or --host`, "web");
      }
      throw error;
    });
    const offered = server.models.length ? ` with ${server.models.map((m) => m.name).join(", ")}` : "";
    io.stderr.write(`infer: web chat at ${server.url}${offered} (Ctrl-C stops)\n`);
    await untilStopped(io);
    io.stderr.write("infer: shutting down\n");
    await server.close();
    return 0;
  },
};
