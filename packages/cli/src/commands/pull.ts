import { pull } from "@infer/hub";
import { type Command, usageError } from "../command.js";
import { formatBytes } from "../format.js";
import { withInterrupt, write } from "../io.js";
import { hubOptions } from "../models.js";
import { ProgressBar } from "../progress.js";

export const pullCommand: Command = {
  name: "pull",
  usage: "<model>",
  summary: "Downloads a model into the cache (INFER_CACHE, else the platform cache folder) and prints its local path. Interrupted downloads resume; every file is checked against the hub's sha256.",
  details: [
    "<model> is an alias or hf:org/repo[:QUANT|:file.gguf]. Without a tag the best GGUF is chosen (Q8_0, then Q4_K_M, ...),",
    "or for repositories without GGUF files the safetensors weights with their config and tokenizer.",
    "HF_ENDPOINT selects another hub; HF_TOKEN is sent for gated or private repositories.",
  ].join("\n"),
  options: {},
  async run(ctx) {
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "pull");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "pull");
    const { io } = ctx;
    const bar = new ProgressBar(io.stderr);
    const { value: result } = await withInterrupt(io, (signal) => pull(spec, { ...hubOptions(io), signal, onProgress: (p) => bar.update(p) }));
    bar.finish();
    const fetched = result.files.filter((f) => !f.cached);
    const bytes = result.files.reduce((sum, f) => sum + f.bytes, 0);
    io.stderr.write(
      fetched.length === 0
        ? `infer: ${spec} is already in the cache (${formatBytes(bytes)})\n`
        : `infer: pulled ${fetched.length} file(s), ${formatBytes(bytes)} in all, sha256 verified\n`,
    );
    await write(io.stdout, `${result.path}\n`);
    return 0;
  },
};
