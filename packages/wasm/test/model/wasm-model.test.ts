/**
 * The wasm TextModel on small random models: every architecture through the
 * public contract, batching against single calls, streaming text against
 * decode, and bad input that must leave the model usable.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it, test } from "node:test";
import { capabilitiesOf, capabilityMismatches, isInferenceError, loadModel, type TextModel, type TokenizerModel } from "@infer/core";
import "@infer/core/node";
import { assertRunawayTemplatesFail, runConformanceSuite } from "@infer/core/testing";
import { GgmlType } from "@infer/formats";
import { wasmBackend } from "../../src/index.js";
import { writeRandomGguf, writeRandomHf, type RandomArchitecture } from "../../src/testing/index.js";

const dir = await mkdtemp(join(tmpdir(), "infer-wasm-model-"));
after(() => rm(dir, { recursive: true, force: true }));

const ARCHITECTURES: RandomArchitecture[] = ["llama", "qwen2", "qwen3", "gemma3", "phi3"];
const paths = new Map<RandomArchitecture, string>();
before(async () => {
  for (const architecture of ARCHITECTURES) {
    const path = join(dir, `${architecture}.gguf`);
    await writeRandomGguf(path, { architecture, seed: 7, type: GgmlType.Q8_0 });
    paths.set(architecture, path);
  }
});

const CHAT_TEMPLATE =
  "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

describe("every architecture through the contract", () => {
  for (const architecture of ARCHITECTURES) {
    it(`${architecture}: generate, stream = decode, batch = single, classify = first token`, async () => {
      await using model = await loadModel(paths.get(architecture)!, { backend: "wasm" });
      assert.equal(model.modelType, architecture);
      const tokenizer = model as unknown as TokenizerModel;
      const greedy = { temperature: 0, maxTokens: 12, ignoreEos: true };
      const single = await Promise.all(
        ["hello", "abc", "xyz!"].map(async (p) => (await model.generateText(p, greedy)).text),
      );
      const batch = await model.batchGenerate(["hello", "abc", "xyz!"], greedy);
      assert.deepEqual(
        batch.map((b) => b.text),
        single,
      );
      const result = await model.generateText("hello", greedy);
      assert.equal(result.tokens.length, 12);
      assert.equal(result.text, tokenizer.decode(result.tokens.map((t) => t.id)));
      const [classified] = await model.classify(["hello"], { logits: true });
      assert.equal(classified!.token.id, result.tokens[0]!.id);
      assert.equal(classified!.logits!.length, model.info().vocabSize);
      const chat = await model.chatText([{ role: "user", content: "hi" }], { ...greedy, chatTemplate: CHAT_TEMPLATE });
      assert.equal(chat.tokens.length, 12);
    });
  }
});

test("continuous batching: more prompts than slots equal single calls", async () => {
  await using model = await loadModel(paths.get("llama")!, { backend: "wasm", parallelSlots: 2 });
  const prompts = ["a", "bb", "ccc", "dddd", "eeeee"];
  const options = { temperature: 0.9, seed: 5, maxTokens: 6, ignoreEos: true };
  const batch = await model.batchGenerate(prompts, options);
  assert.equal(model.metrics().generatedTokens, 30);
  for (let i = 0; i < prompts.length; i++) {
    const single = await model.generateText(prompts[i]!, options);
    assert.equal(batch[i]!.text, single.text, `prompt ${i}`);
    assert.equal(batch[i]!.finishReason, "length");
  }
});

test("HF safetensors and GGUF of the same random weights generate the same tokens", async () => {
  const folder = join(dir, "llama-hf");
  await writeRandomHf(folder, { architecture: "llama", seed: 11 });
  const gguf = join(dir, "llama-f32.gguf");
  await writeRandomGguf(gguf, { architecture: "llama", seed: 11, type: GgmlType.F32 });
  await using hf = await loadModel(folder, { backend: "wasm" });
  await using gg = await loadModel(gguf, { backend: "wasm" });
  const options = { temperature: 0, maxTokens: 16, ignoreEos: true };
  const a = await hf.generateText("the same", options);
  const b = await gg.generateText("the same", options);
  assert.deepEqual(
    a.tokens.map((t) => t.id),
    b.tokens.map((t) => t.id),
  );
});

describe("batchSize", () => {
  /** The transformer's activation scratch, read through the model's internals (it is not in the contract). */
  function scratchBytes(model: TextModel): number {
    return (model as unknown as { parts: { transformer: { scratch: { bytes: number } } } }).parts.transformer.scratch.bytes;
  }

  it("prompts evaluated in chunks of 1, 7 or 128 tokens give the same tokens and logits, in less scratch for less", async () => {
    const prompt = "the quick brown fox jumps over the lazy dog ".repeat(3);
    const greedy = { temperature: 0, maxTokens: 8, ignoreEos: true };
    const runs = [];
    for (const batchSize of [1, 7, undefined]) {
      await using model = await loadModel(paths.get("llama")!, { backend: "wasm", threads: 1, batchSize });
      const tokenizer = model as unknown as TokenizerModel;
      assert.ok(tokenizer.encode(prompt).length > 40, "the prompt spans several chunks");
      const text = await model.generateText(prompt, greedy);
      const [classified] = await model.classify([prompt], { logits: true });
      runs.push({ ids: text.tokens.map((t) => t.id), logits: classified!.logits!, scratch: scratchBytes(model) });
    }
    const [one, seven, whole] = runs as [(typeof runs)[0], (typeof runs)[0], (typeof runs)[0]];
    for (const run of [one, seven]) {
      assert.deepEqual(run.ids, whole.ids);
      for (let i = 0; i < whole.logits.length; i++) {
        assert.ok(Math.abs(run.logits[i]! - whole.logits[i]!) <= 1e-4 * (1 + Math.abs(whole.logits[i]!)), `logit ${i}: ${run.logits[i]} vs ${whole.logits[i]}`);
      }
    }
    assert.ok(one.scratch < seven.scratch && seven.scratch < whole.scratch, `scratch bytes ${one.scratch}, ${seven.scratch}, ${whole.scratch}`);
  });

  it("a batch size that is not a positive integer is INVALID_OPTION naming it", async () => {
    await assert.rejects(loadModel(paths.get("llama")!, { backend: "wasm", batchSize: 0 }), (error: unknown) => {
      assert.ok(isInferenceError(error, "INVALID_OPTION") && error.message.includes("batchSize"), String(error));
      return true;
    });
  });
});

describe("bad input leaves the model usable", () => {
  let model: TextModel;
  before(async () => {
    model = await loadModel(paths.get("qwen2")!, { backend: "wasm", contextLength: 32 });
  });
  after(() => model.close());

  const expectCode = async (work: Promise<unknown>, code: string, mentions?: string) => {
    await assert.rejects(work, (error: unknown) => {
      assert.ok(isInferenceError(error), `expected InferenceError, got ${String(error)}`);
      assert.equal(error.code, code);
      if (mentions) assert.match(error.message, new RegExp(mentions));
      return true;
    });
  };

  it("a prompt longer than the context fails with CONTEXT_OVERFLOW naming both sizes", async () => {
    await expectCode(model.generateText("x".repeat(100)), "CONTEXT_OVERFLOW", "32");
    assert.equal(model.err()?.message.includes("32"), true);
    const ok = await model.generateText("hi", { temperature: 0, maxTokens: 3, ignoreEos: true });
    assert.equal(ok.tokens.length, 3);
    assert.equal(model.err(), undefined);
  });

  it("generation stops at the end of the context with reason length", async () => {
    const result = await model.generateText("hi", { temperature: 0, ignoreEos: true });
    assert.equal(result.finishReason, "length");
    assert.equal(model.metrics().promptTokens + result.tokens.length, 32 + 1);
  });

  it("a batch with one oversized prompt fails only that prompt", async () => {
    const results = await model.batchGenerate(["ok", "y".repeat(100), "fine"], { temperature: 0, maxTokens: 2, ignoreEos: true });
    assert.equal(results[0]!.finishReason, "length");
    assert.equal(results[1]!.finishReason, "error");
    assert.equal((results[1]!.error as { code?: string }).code, "CONTEXT_OVERFLOW");
    assert.equal(results[2]!.tokens.length, 2);
  });

  it("a stop token outside the vocabulary is INVALID_OPTION", async () => {
    await expectCode(model.generateText("hi", { stopTokens: [10_000_000] }), "INVALID_OPTION", "stopTokens");
  });

  it("chat without any template is NO_CHAT_TEMPLATE", async () => {
    await expectCode(model.chatText([{ role: "user", content: "hi" }]), "NO_CHAT_TEMPLATE");
  });

  it("a runaway chat template (huge loops, deep nesting, huge strings) fails fast with INVALID_OPTION", async () => {
    await assertRunawayTemplatesFail(model, "{{ messages[0].content }}");
  });

  it("an aborted batch returns reason abort for every prompt, then the model works", async () => {
    const controller = new AbortController();
    controller.abort();
    const aborted = await model.batchGenerate(["a", "b"], { signal: controller.signal });
    assert.deepEqual(
      aborted.map((r) => r.finishReason),
      ["abort", "abort"],
    );
    const results = await model.batchGenerate(["a", "b"], { temperature: 0, maxTokens: 2, ignoreEos: true });
    assert.deepEqual(
      results.map((r) => r.tokens.length),
      [2, 2],
    );
  });
});

test("load options the engine cannot honour fail with clear codes", async () => {
  const path = paths.get("llama")!;
  const cases: [object, string, string][] = [
    [{ adapterPath: "/x" }, "MODEL_NOT_FOUND", "LoRA adapter"],
    [{ draftModel: "/x" }, "UNSUPPORTED", "draftModel"],
    [{ gpuLayers: 5 }, "UNSUPPORTED", "gpuLayers"],
    [{ isolate: true }, "UNSUPPORTED", "isolate"],
    [{ isolate: "yes" }, "INVALID_OPTION", "isolate"],
    [{ contextLength: 2 ** 40 }, "INVALID_OPTION", "contextLength"],
    [{ threads: 0 }, "INVALID_OPTION", "threads"],
  ];
  for (const [options, code, field] of cases) {
    await assert.rejects(loadModel(path, { backend: "wasm", ...options }), (error: unknown) => {
      assert.ok(isInferenceError(error, code as never), `${JSON.stringify(options)}: ${String(error)}`);
      assert.match((error as Error).message, new RegExp(field));
      return true;
    });
  }
});

test("a missing tokenizer in an HF folder is MODEL_FORMAT naming the file", async () => {
  const folder = join(dir, "no-tokenizer");
  await writeRandomHf(folder, { architecture: "llama", seed: 3 });
  await rm(join(folder, "tokenizer.json"));
  await writeFile(join(folder, "tokenizer_config.json"), "{}");
  await assert.rejects(loadModel(folder, { backend: "wasm" }), (error: unknown) => {
    assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
    assert.match((error as Error).message, /tokenizer/);
    return true;
  });
});

test("capabilities of a wasm model", async () => {
  await using model = await loadModel(paths.get("llama")!, { backend: "wasm" });
  const report = capabilitiesOf(model);
  assert.equal(report.tokenizer, "supported");
  assert.equal(report["batch.generate"], "supported");
  assert.equal(report["probe.logits"], "supported");
  assert.equal(report.grammar, "unsupported");
});

test("every random model, GGUF and Hugging Face, reports its backend's capabilities (core's rule)", async () => {
  for (const architecture of ARCHITECTURES) {
    const folder = join(dir, `${architecture}-hf`);
    await writeRandomHf(folder, { architecture, seed: 3 });
    for (const path of [paths.get(architecture)!, folder]) {
      await using model = await loadModel(path, { backend: "wasm" });
      assert.deepEqual(capabilityMismatches(wasmBackend, model), [], path);
      // Only training varies by model kind on this backend (phi3 does not train): else each report is the backend's table.
      const trains = architecture !== "phi3";
      assert.deepEqual(capabilitiesOf(model), { ...capabilitiesOf(wasmBackend), "lora.training": trains ? "supported" : "unsupported" }, path);
    }
  }
});

runConformanceSuite({
  name: "wasm random qwen3 Q8_0",
  backend: wasmBackend,
  load: async () => {
    const path = join(dir, "conformance-qwen3.gguf");
    await writeRandomGguf(path, { architecture: "qwen3", seed: 21, type: GgmlType.Q8_0 });
    return loadModel(path, { backend: "wasm" });
  },
  prompt: "abc",
  chatMessages: [{ role: "user", content: "hi" }],
  chatTemplate: CHAT_TEMPLATE,
});

test("logprobs: each token's log-probability and alternatives, from the model's distribution", async () => {
  await using model = await loadModel(paths.get("qwen2")!, { backend: "wasm" });
  const result = await model.generateText("hello", { temperature: 0, maxTokens: 4, ignoreEos: true, logprobs: 3 });
  const [first] = await model.classify(["hello"], { logits: true });
  const logits = first!.logits!;
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const expected = logits[result.tokens[0]!.id]! - max - Math.log(sum);
  assert.ok(Math.abs(result.tokens[0]!.logprob! - expected) < 1e-4, `${result.tokens[0]!.logprob} vs ${expected}`);
  for (const token of result.tokens) {
    assert.equal(token.topLogprobs!.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(token.topLogprobs![0]!.id, token.id);
    assert.equal(token.topLogprobs![0]!.logprob, token.logprob);
    const probs = token.topLogprobs!.map((alt) => Math.exp(alt.logprob));
    assert.ok(probs.every((p, i) => p <= 1 && (i === 0 || p <= probs[i - 1]!)));
    assert.ok(probs.reduce((a, b) => a + b, 0) <= 1 + 1e-6);
  }
  const plain = await model.generateText("hello", { temperature: 0, maxTokens: 2, ignoreEos: true });
  assert.equal(plain.tokens[0]!.logprob, undefined);
});

test("unseeded sampling in a batch: each sequence draws its own seed", async () => {
  await using model = await loadModel(paths.get("llama")!, { backend: "wasm" });
  const prompts = Array.from({ length: 4 }, () => "same prompt");
  const results = await model.batchGenerate(prompts, { temperature: 1.5, topK: 0, topP: 1, minP: 0, maxTokens: 12, ignoreEos: true });
  const distinct = new Set(results.map((r) => r.tokens.map((t) => t.id).join(",")));
  assert.ok(distinct.size > 1, "four hot samples of one prompt all came out identical");
});
