/**
 * `infer train` on tinystories-656k with a four-line JSONL: a short run
 * writes a PEFT adapter that loads through adapterPath and changes the
 * logits, loss.svg and a checkpoint; Ctrl-C stops after a step and --resume
 * finishes with the very adapter a straight run writes; bad flags and data
 * are usage / INVALID_OPTION errors.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { loadModel } from "@infer/core";
import { cosineSimilarity } from "@infer/core/testing";
import { runCli } from "./helpers.js";

const model = fileURLToPath(new URL("../../../../../shared/models/tinystories-656k", import.meta.url));
const skip = existsSync(model) ? false : `needs ${model} (the shared test models are not here)`;
const FACTS = [
  "Tom had a dog. The dog was named Zorblat. Zorblat liked to run.",
  "Tom had a dog. The dog was named Zorblat. Zorblat was very happy.",
  "Lily saw Tom's dog. The dog was named Zorblat.",
  "Tom had a dog. The dog was named Zorblat. Tom and Zorblat played in the park.",
];
const PROMPT = "Tom had a dog. The dog was named";

describe("infer train on tinystories-656k", { skip }, () => {
  let dir: string;
  let data: string;
  let evalData: string;
  const args = (out: string) => ["train", model, "--data", data, "--eval", evalData, "--out", out, "--epochs", "4", "--batch", "2", "--lr", "1e-2", "--dropout", "0.1", "--save-every", "2", "--eval-every", "2", "--threads", "1"];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-train-cli-"));
    data = join(dir, "train.jsonl");
    evalData = join(dir, "eval.jsonl");
    await writeFile(data, FACTS.map((text) => JSON.stringify({ text })).join("\n") + "\n");
    await writeFile(evalData, `${JSON.stringify({ prompt: PROMPT, completion: " Zorblat." })}\n`);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function promptLogits(options: { adapterPath?: string }): Promise<Float32Array> {
    const loaded = await loadModel(model, { backend: "wasm", threads: 1, ...options });
    try {
      return (await loaded.classify([PROMPT], { logits: true }))[0]!.logits!;
    } finally {
      await loaded.close();
    }
  }

  test("writes a PEFT adapter that loads through adapterPath, a checkpoint and loss.svg", async () => {
    const out = join(dir, "straight");
    const { code, stdout, stderr } = await runCli(args(out));
    assert.equal(code, 0, stderr);
    assert.equal(stdout, `${out}\n`);
    assert.match(stderr, /step 8\/8 .*loss \d+\.\d+ .*eval \d+\.\d+ .*tok\/s .*ETA/);
    const losses = [...stderr.matchAll(/step +\d+\/8 .*? loss (\d+\.\d+)/g)].map((m) => Number(m[1]));
    assert.equal(losses.length, 8);
    assert.ok(losses[7]! < losses[0]!, `loss fell: ${losses.join(", ")}`);
    const config = JSON.parse(await readFile(join(out, "adapter_config.json"), "utf8")) as Record<string, unknown>;
    assert.equal(config.peft_type, "LORA");
    assert.equal(config.r, 8);
    assert.deepEqual([...(config.target_modules as string[])].sort(), ["q_proj", "v_proj"]);
    const svg = await readFile(join(out, "loss.svg"), "utf8");
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal(/<polyline points="([^"]*)"/.exec(svg)![1]!.split(" ").length, 8);
    assert.equal(svg.match(/<circle /g)?.length, 4, "eval loss every 2 steps");
    assert.ok(existsSync(join(out, "checkpoint.bin")));
    const base = await promptLogits({});
    const adapted = await promptLogits({ adapterPath: out });
    assert.ok(cosineSimilarity(base, adapted) < 0.9999, "the adapter changes the logits");
  });

  test("Ctrl-C stops after a step with a checkpoint; --resume ends with the straight run's adapter, byte for byte", async () => {
    const out = join(dir, "interrupted");
    const signals = new EventEmitter();
    const first = await runCli(args(out), {
      signals,
      during: async (io) => {
        await new Promise<void>((resolve) => {
          io.stderr.on("data", (chunk: Buffer) => {
            if (/step +1\/8/.test(chunk.toString())) {
              signals.emit("SIGINT");
              resolve();
            }
          });
        });
      },
    });
    assert.equal(first.code, 130, first.stderr);
    const stopped = Number(/stopped after step (\d+) of 8/.exec(first.stderr)?.[1]);
    assert.ok(stopped >= 1 && stopped < 8, first.stderr);
    const second = await runCli([...args(out), "--resume"]);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stderr, new RegExp(`resumed at step ${stopped}`));
    const straight = await readFile(join(dir, "straight", "adapter_model.safetensors"));
    assert.deepEqual(await readFile(join(out, "adapter_model.safetensors")), straight);
    assert.deepEqual(await readFile(join(out, "loss.svg"), "utf8"), await readFile(join(dir, "straight", "loss.svg"), "utf8"));
  });

  test("bad flags are usage errors; bad data names its line", async () => {
    for (const extra of [["--rank", "0"], ["--alpha", "0"], ["--targets", "q_proj,wq"], ["--epochs", "1.5"], ["--lr", "fast"]]) {
      const { code, stderr } = await runCli([...args(join(dir, "bad")), ...extra]);
      assert.equal(code, 2, extra.join(" "));
      assert.match(stderr, /^infer: error INVALID_OPTION: .*--help`\n$/, extra.join(" "));
    }
    const noData = await runCli(["train", model, "--out", join(dir, "bad")]);
    assert.equal(noData.code, 2);
    const broken = join(dir, "broken.jsonl");
    await writeFile(broken, `${JSON.stringify({ text: "fine" })}\n{"text": 3}\n`);
    const bad = await runCli(["train", model, "--data", broken, "--out", join(dir, "bad")]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /INVALID_OPTION: .*broken\.jsonl:2: "text" must be a string/);
  });
});
