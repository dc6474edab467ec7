import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InferenceError, LORA_TARGET_MODULES, loadTrainable, totalTrainSteps, train, type TrainExample } from "@infer/core";
import { checkpointDirectory } from "@infer/core/node";
import { WasmTrainableModel } from "@infer/wasm";
import { registerBackends } from "../backends.js";
import { type Command, numberFlag, stringFlag, usageError } from "../command.js";
import { withInterrupt, write } from "../io.js";
import { localPath } from "../models.js";
import { lossCurveSvg } from "../train/loss-svg.js";
import { TrainProgressLine } from "../train/progress.js";

const NAME = "train";

export const trainCommand: Command = {
  name: NAME,
  usage: "<model> --data train.jsonl --out adapter/",
  summary: "Fine-tunes a LoRA adapter on a JSONL dataset with the wasm engine; writes a PEFT folder, a checkpoint and loss.svg.",
  details: [
    'Data: one JSON object a line: {"text"}, {"prompt","completion"} (learns the completion) or {"messages"} (learns the assistant turns).',
    "Checkpoints go to <out>/checkpoint.bin (every --save-every steps, after the last one and at Ctrl-C); --resume continues from it",
    "exactly as the run would have gone on (same data, flags and seed). Ctrl-C stops after the step in progress.",
    "The learning rate warms up linearly for --warmup steps, then follows a cosine to 0 at the last step.",
  ].join("\n"),
  options: {
    data: { type: "string", value: "file.jsonl", description: "training examples (required)" },
    eval: { type: "string", value: "file.jsonl", description: "held-out examples: their loss is shown every --eval-every steps" },
    out: { type: "string", short: "o", value: "dir", description: "where the adapter, checkpoint.bin and loss.svg go (required)" },
    rank: { type: "string", value: "r", description: "LoRA rank (default 8)" },
    alpha: { type: "string", value: "x", description: "LoRA alpha (default 16)" },
    dropout: { type: "string", value: "p", description: "LoRA dropout (default 0)" },
    targets: { type: "string", value: "list", description: `comma-separated modules (default q_proj,v_proj; of ${LORA_TARGET_MODULES.join(",")})` },
    epochs: { type: "string", value: "n", description: "passes over the data (default 1)" },
    lr: { type: "string", value: "x", description: "peak learning rate (default 2e-4)" },
    batch: { type: "string", value: "n", description: "examples a step (default 8)" },
    accumulation: { type: "string", value: "n", description: "split each step's examples into n passes (less memory, same update; default 1)" },
    warmup: { type: "string", value: "steps", description: "linear warmup steps (default 0)" },
    "max-grad-norm": { type: "string", value: "x", description: "clip the gradient norm to x; 0 = off (default 1)" },
    "max-length": { type: "string", value: "tokens", description: "cut longer examples to this many tokens" },
    "eval-every": { type: "string", value: "steps", description: "eval loss interval (default: a tenth of the run)" },
    "save-every": { type: "string", value: "steps", description: "checkpoint interval (default: a tenth of the run)" },
    seed: { type: "string", value: "n", description: "seeds the adapter's initial values, dropout and shuffling (default 0)" },
    threads: { type: "string", value: "n", description: "CPU threads" },
    resume: { type: "boolean", description: "continue from <out>/checkpoint.bin" },
  },
  async run(ctx) {
    const { io, values } = ctx;
    const [spec, ...extra] = ctx.positionals;
    if (!spec) throw usageError("train needs <model>", NAME);
    if (extra.length) throw usageError(`unexpected arguments: ${extra.join(" ")}`, NAME);
    const data = stringFlag(values, "data");
    const out = stringFlag(values, "out");
    if (!data) throw usageError("train needs --data <file.jsonl>", NAME);
    if (!out) throw usageError("train needs --out <dir>", NAME);
    const number = (name: string, integer: boolean, min: number, max = Infinity) => numberFlag(values, name, NAME, integer, min, max);
    const rank = number("rank", true, 1) ?? 8;
    const alpha = number("alpha", false, Number.MIN_VALUE) ?? 16;
    const dropout = number("dropout", false, 0, 0.999) ?? 0;
    const targets = (stringFlag(values, "targets") ?? "q_proj,v_proj").split(",").map((t) => t.trim()).filter(Boolean);
    const unknown = targets.filter((t) => !(LORA_TARGET_MODULES as readonly string[]).includes(t));
    if (targets.length === 0 || unknown.length) throw usageError(`--targets must name modules of ${LORA_TARGET_MODULES.join(",")} (got ${JSON.stringify(stringFlag(values, "targets"))})`, NAME);
    const epochs = number("epochs", true, 1) ?? 1;
    const learningRate = number("lr", false, 0) ?? 2e-4;
    const batchSize = number("batch", true, 1) ?? 8;
    const microBatches = number("accumulation", true, 1) ?? 1;
    const warmupSteps = number("warmup", true, 0) ?? 0;
    const maxGradNorm = number("max-grad-norm", false, 0) ?? 1;
    const maxLength = number("max-length", true, 2);
    const seed = number("seed", true, 0) ?? 0;
    const threads = number("threads", true, 1);
    const evalEveryFlag = number("eval-every", true, 1);
    const saveEveryFlag = number("save-every", true, 1);
    const evalFile = stringFlag(values, "eval");

    const path = await localPath(spec, io);
    await registerBackends();
    const model = await loadTrainable(path, { backend: "wasm", ...(threads !== undefined ? { threads } : {}) });
    try {
      if (!(model instanceof WasmTrainableModel)) throw new InferenceError("TRAINING_UNSUPPORTED", "infer train needs the wasm backend's trainable model");
      const examplesOf = async (file: string, option: string) => {
        const text = await readFile(file, "utf8").catch((error: unknown) => {
          throw new InferenceError("MODEL_NOT_FOUND", `no ${option} file at '${file}'`, { cause: error, details: { option, file } });
        });
        // Examples without a target teach nothing (a prompt cut before its completion, ...).
        const examples: TrainExample[] = model.jsonlExamples(text, file, maxLength !== undefined ? { maxLength } : {}).filter((e) => e.lossMask.some((m, t) => t > 0 && m > 0));
        if (examples.length === 0) throw new InferenceError("INVALID_OPTION", `${file}: no example has a token to learn`, { details: { option, file } });
        return examples;
      };
      const examples = await examplesOf(data, "data");
      const evalExamples = evalFile !== undefined ? await examplesOf(evalFile, "eval") : undefined;
      const adapter = model.applyLoRA({ rank, alpha, dropout, targetModules: targets, seed });
      const schedule = { epochs, batchSize: Math.ceil(batchSize / microBatches), gradientAccumulation: microBatches };
      const totalSteps = totalTrainSteps(examples.length, schedule);
      const tenth = Math.max(1, Math.ceil(totalSteps / 10));
      io.stderr.write(`infer: training ${adapter.totalParams} LoRA parameters on ${examples.length} examples: ${totalSteps} steps\n`);
      const progress = new TrainProgressLine(io.stderr);
      const { value: result, interrupted } = await withInterrupt(io, (signal) =>
        train(model, examples, {
          ...schedule,
          learningRate,
          warmupSteps,
          maxGradNorm,
          seed,
          ...(evalExamples ? { evalExamples, evalEvery: evalEveryFlag ?? tenth } : {}),
          checkpoints: checkpointDirectory(out),
          checkpointEvery: saveEveryFlag ?? tenth,
          resume: values.resume === true,
          signal,
          onStep: (p) => progress.update(p),
        }).finally(() => progress.finish()),
      );
      await adapter.save(out);
      await writeFile(join(out, "loss.svg"), lossCurveSvg(result.history, `${spec}: LoRA r=${rank} alpha=${alpha} ${targets.join(",")}`));
      const resumed = result.resumedFrom > 0 ? ` (resumed at step ${result.resumedFrom})` : "";
      const evalText = result.finalEvalLoss !== undefined ? `, eval loss ${result.finalEvalLoss.toFixed(4)}` : "";
      io.stderr.write(
        interrupted
          ? `infer: stopped after step ${result.steps} of ${result.totalSteps}; --resume continues from ${join(out, "checkpoint.bin")}\n`
          : `infer: trained ${result.steps} steps${resumed}, loss ${result.finalLoss?.toFixed(4) ?? "?"}${evalText}\n`,
      );
      await write(io.stdout, `${out}\n`);
      return interrupted ? 130 : 0;
    } finally {
      await model.close();
    }
  },
};
