import { capabilitiesOf, supportedCapabilities } from "@infer/core";
import { type Command, usageError } from "../command.js";
import { formatPairs } from "../format.js";
import { write } from "../io.js";
import { LOAD_FLAGS, loadOptionsOf, openModel } from "../models.js";

export const infoCommand: Command = {
  name: "info",
  usage: "<model>",
  summary: "Loads a model and prints its metadata: architecture, sizes, context, quantization, backend and capabilities.",
  options: { ...LOAD_FLAGS, json: { type: "boolean", description: "print JSON instead of a table" } },
  async run(ctx) {
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("missing <model>", "info");
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, "info");
    const { model, path, loadMs } = await openModel(spec, ctx.io, loadOptionsOf(ctx, "info"), ctx.values.verbose === true);
    try {
      const info = model.info();
      if (ctx.values.json === true) {
        await write(ctx.io.stdout, JSON.stringify({ path, backend: model.backend, modelType: model.modelType, loadMs, info, capabilities: capabilitiesOf(model) }) + "\n");
        return 0;
      }
      const pairs: Array<[string, string]> = [
        ["path", path],
        ["backend", model.backend],
        ["architecture", info.architecture],
        ["format", info.format],
        ["parameters", info.parameters !== undefined ? info.parameters.toLocaleString("en-US") : "unknown"],
        ["layers", String(info.numLayers)],
        ["hidden size", String(info.hiddenSize)],
        ["vocabulary", String(info.vocabSize)],
        ["context length", String(info.contextLength)],
        ["weights", `${info.quantBits}-bit${info.quantGroup ? `, blocks of ${info.quantGroup}` : ""}`],
        ["load time", `${loadMs.toFixed(0)} ms`],
        ["capabilities", supportedCapabilities(model).join(", ")],
      ];
      await write(ctx.io.stdout, formatPairs(pairs));
      return 0;
    } finally {
      await model.close();
    }
  },
};
