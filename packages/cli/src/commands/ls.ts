import { basename, delimiter, join, relative, resolve } from "node:path";
import { cacheDir, type DiscoveredModel, discoverModels, listAliases, refOfCachedPath } from "@infer/hub";
import { type Command, listFlag } from "../command.js";
import { formatBytes, formatTable } from "../format.js";
import { write } from "../io.js";

export const lsCommand: Command = {
  name: "ls",
  usage: "[--dir <folder>]...",
  summary: "Lists models: pulled ones in the cache, and ones found under --dir folders and INFER_MODELS_PATH (a path list).",
  options: {
    dir: { type: "string", multiple: true, value: "folder", description: "also search this folder for .gguf files and Hugging Face folders" },
    aliases: { type: "boolean", description: "list the known aliases instead" },
    json: { type: "boolean", description: "print JSON instead of a table" },
  },
  async run(ctx) {
    const { io } = ctx;
    if (ctx.values.aliases === true) {
      const aliases = listAliases();
      await write(io.stdout, ctx.values.json === true ? JSON.stringify(aliases) + "\n" : formatTable(["ALIAS", "TARGET"], aliases.map((a) => [a.name, a.target])));
      return 0;
    }
    const root = cacheDir(io.env);
    const dirs = [...listFlag(ctx.values, "dir"), ...(io.env.INFER_MODELS_PATH ?? "").split(delimiter).filter(Boolean)].map((d) => resolve(d));
    const rows: Array<DiscoveredModel & { name: string; source: string }> = [];
    for (const model of await discoverModels(join(root, "hub"))) {
      rows.push({ ...model, name: refOfCachedPath(model.path, root) ?? model.path, source: "cache" });
    }
    for (const dir of dirs) {
      for (const model of await discoverModels(dir)) {
        if (!rows.some((r) => r.path === model.path)) rows.push({ ...model, name: relative(dir, model.path) || basename(model.path), source: dir });
      }
    }
    if (ctx.values.json === true) {
      await write(io.stdout, JSON.stringify(rows) + "\n");
      return 0;
    }
    if (rows.length === 0) {
      io.stderr.write(`infer: no models in ${root} or the searched folders; try \`infer pull smollm2-135m\`\n`);
      return 0;
    }
    await write(
      io.stdout,
      formatTable(
        ["NAME", "FORMAT", "ARCH", "QUANT", "SIZE", "PATH"],
        rows.map((r) => [r.name, r.format, r.modelType, r.quantization ?? "-", formatBytes(r.bytes), r.path]),
      ),
    );
    return 0;
  },
};
