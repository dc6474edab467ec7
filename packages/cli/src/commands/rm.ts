import { removeCached } from "@infer/hub";
import { type Command, usageError } from "../command.js";
import { hubOptions } from "../models.js";

export const rmCommand: Command = {
  name: "rm",
  usage: "<model>",
  summary: "Deletes a pulled model from the cache (every file of that repository and revision). Files outside the cache are never touched.",
  options: {},
  async run(ctx) {
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "rm");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "rm");
    const removed = await removeCached(spec, { cacheDir: hubOptions(ctx.io).cacheDir });
    ctx.io.stderr.write(`infer: removed ${removed}\n`);
    return 0;
  },
};
