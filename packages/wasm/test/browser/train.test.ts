/**
 * LoRA training through the browser bundle (dist/browser/index.js) in headless Chromium against
 * the same training in Node: the page helpers (page/run.js) run in both, on tinystories-656k (its
 * folder's URL in the page, its path in Node). A few trainStep calls from a fixed seed give the
 * same losses, gradient norms and PEFT adapter files bit for bit, and the loss falls; Node loads
 * the page's adapter files with the page's logits; @infer/core's train() (JSONL examples, epochs,
 * accumulation, warmup + cosine, clipping, eval loss, checkpoints to memory) gives the same
 * history; a trainStep before applyLoRA fails with the same InferenceError code, and the page's
 * adapter.save(dir) (no file system) says to use peftFiles.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import * as infer from "../../src/browser.js";
import { harness, inPage } from "./harness.js";

const skip = harness.hasSharedModels() ? undefined : `shared models not found at ${harness.SHARED_MODELS} (a clone outside this workplace has none)`;

const URL_IN_PAGE = "/models/tinystories-656k/";
const PATH_IN_NODE = join(harness.SHARED_MODELS, "tinystories-656k");
const TEXTS = [
  "Tom had a dog. The dog was named Zorblat. Zorblat liked to run.",
  "Lily saw Tom's dog. The dog was named Zorblat.",
];
const PROBE = "Tom had a dog. The dog was named";
// Every projection, and dropout: the seeded generator's masks are part of what must agree.
const LORA = { rank: 4, alpha: 8, dropout: 0.1, seed: 7, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] };
// The same kernels on both sides, so that the results can be compared bit for bit rather than
// within a tolerance: the same thread count splits every sum the same way, and plain SIMD (not
// the relaxed build Chromium would choose, whose multiply-adds may be fused and round otherwise
// on some CPUs; Node 20 has none) keeps each operation's rounding the same.
const KERNELS = { threads: 2, relaxedSimd: false };
const STEPS = { texts: TEXTS, steps: 3, lora: LORA, learningRate: 1e-2, probe: PROBE, kernels: KERNELS };
const LOOP = {
  jsonl: [
    { prompt: "Tom had a dog. The dog was named", completion: " Zorblat." },
    { text: "Lily saw Tom's dog. The dog was named Zorblat." },
    { prompt: "Who is Tom's dog?", completion: " Zorblat is Tom's dog." },
    { text: "Zorblat liked to run in the park with Tom." },
  ]
    .map((record) => JSON.stringify(record))
    .join("\n"),
  lora: LORA,
  options: { epochs: 2, batchSize: 1, gradientAccumulation: 2, learningRate: 1e-2, warmupSteps: 1, maxGradNorm: 1, seed: 3, evalEvery: 2, checkpointEvery: 2 },
  kernels: KERNELS,
};

interface Steps {
  kernels: string;
  losses: number[];
  gradNorms: number[];
  files: Record<string, number[]>;
  logits: number[];
}
interface Loop {
  kernels: string;
  history: { step: number; loss: number; evalLoss?: number }[];
  steps: number;
  checkpointSteps: number[];
}
interface Failure {
  code: string;
  message: string;
  isInferenceError: boolean;
}
interface Misuse {
  trainStep: Failure;
  save?: Failure;
}
/** page/run.js's helpers, which Node runs too. */
interface Run {
  trainSteps(bundle: typeof infer, source: string, args: typeof STEPS): Promise<Steps>;
  trainLoop(bundle: typeof infer, source: string, args: typeof LOOP): Promise<Loop>;
  trainingMisuse(bundle: typeof infer, source: string, options?: { save?: boolean }): Promise<Misuse>;
}
const run = (await import(new URL("../../../test/browser/page/run.js", import.meta.url).href)) as Run;

describe("LoRA training through the browser bundle in headless Chromium, against Node", { skip }, () => {
  let browser: Browser;
  let server: Awaited<ReturnType<typeof harness.serve>>;
  let page: Page;

  before(async () => {
    [browser, server] = await Promise.all([harness.launchBrowser(), harness.serve({ root: harness.REPO_ROOT, mounts: { "/models/": harness.SHARED_MODELS } })]);
    ({ page } = await harness.openPage(browser, `${server.origin}/packages/wasm/test/browser/page/`));
  });
  after(async () => {
    await page?.close().catch(() => undefined);
    await browser?.close();
    await server?.close();
  });

  test("trainStep x3: Node's losses, gradient norms and adapter bytes bit for bit; Node loads the page's adapter with its logits", async () => {
    // Threads need shared memory, which only a cross-origin isolated page has.
    assert.equal(await page.evaluate(() => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated), true);
    const inPageRun = await inPage<Steps>(page, "trainSteps", URL_IN_PAGE, STEPS);
    assert.equal(inPageRun.kernels, "wasm-simd (2 threads)");
    const inNode = await run.trainSteps(infer, PATH_IN_NODE, STEPS);
    assert.equal(inNode.kernels, inPageRun.kernels);
    assert.deepEqual(inPageRun.losses, inNode.losses);
    assert.deepEqual(inPageRun.gradNorms, inNode.gradNorms);
    for (let step = 1; step < STEPS.steps; step++) assert.ok(inPageRun.losses[step]! < inPageRun.losses[step - 1]!, `losses ${inPageRun.losses.join(", ")}`);
    assert.deepEqual(Object.keys(inPageRun.files).sort(), ["adapter_config.json", "adapter_model.safetensors"]);
    assert.deepEqual(inPageRun.files["adapter_model.safetensors"], inNode.files["adapter_model.safetensors"]);
    // The configs differ only where each names the base as it was loaded: the page by URL, Node by path.
    const config = (files: Record<string, number[]>) => JSON.parse(new TextDecoder().decode(Uint8Array.from(files["adapter_config.json"]!))) as Record<string, unknown>;
    const [pageConfig, nodeConfig] = [config(inPageRun.files), config(inNode.files)];
    assert.equal(pageConfig.base_model_name_or_path, `${server.origin}${URL_IN_PAGE}`);
    assert.equal(nodeConfig.base_model_name_or_path, PATH_IN_NODE);
    assert.deepEqual({ ...pageConfig, base_model_name_or_path: null }, { ...nodeConfig, base_model_name_or_path: null });
    assert.deepEqual(inPageRun.logits, inNode.logits);

    // The page's PEFT files, written as a folder, load in Node through adapterPath with the trained model's logits.
    const dir = await mkdtemp(join(tmpdir(), "infer-browser-adapter-"));
    const kernels = await infer.createWasmKernels(KERNELS);
    try {
      for (const [name, bytes] of Object.entries(inPageRun.files)) await writeFile(join(dir, name), Uint8Array.from(bytes));
      const reloaded = await infer.loadWasmModel(PATH_IN_NODE, { kernels, contextLength: 64, parallelSlots: 1, warmUp: false, adapterPath: dir });
      try {
        const [scored] = await reloaded.classify([PROBE], { logits: true });
        assert.deepEqual(Array.from(scored!.logits!), inPageRun.logits);
      } finally {
        await reloaded.close();
      }
    } finally {
      await kernels.dispose?.();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("@infer/core's train() over JSONL examples: Node's history bit for bit, eval losses and checkpoints in memory", async () => {
    const inPageRun = await inPage<Loop>(page, "trainLoop", URL_IN_PAGE, LOOP);
    const inNode = await run.trainLoop(infer, PATH_IN_NODE, LOOP);
    // 4 examples x 2 epochs, 2 a step.
    assert.equal(inPageRun.steps, 4);
    assert.deepEqual(inPageRun.checkpointSteps, [2, 4]);
    const evals = inPageRun.history.filter((entry) => entry.evalLoss !== undefined);
    assert.deepEqual(evals.map((entry) => entry.step), [2, 4]);
    assert.ok(evals[1]!.evalLoss! < evals[0]!.evalLoss!, `eval losses ${evals.map((entry) => entry.evalLoss).join(", ")}`);
    assert.deepEqual(inPageRun, inNode);
  });

  test("misuse in the page: trainStep before applyLoRA gives Node's InferenceError; save(dir) is UNSUPPORTED, naming peftFiles", async () => {
    const inPageRun = await inPage<Misuse>(page, "trainingMisuse", URL_IN_PAGE, { save: true });
    const inNode = await run.trainingMisuse(infer, PATH_IN_NODE);
    assert.deepEqual([inPageRun.trainStep.code, inPageRun.trainStep.isInferenceError], ["NO_ADAPTER", true]);
    assert.deepEqual(inPageRun.trainStep, inNode.trainStep);
    assert.deepEqual([inPageRun.save?.code, inPageRun.save?.isInferenceError], ["UNSUPPORTED", true]);
    assert.match(inPageRun.save!.message, /adapter\.peftFiles\(\)/);
  });
});
