/**
 * The two backends agree on the same files: each GGUF model is loaded through
 * the @infer/core contract once with backend "wasm" (our engine) and once with
 * "llama_cpp" (llama.cpp), and for a few prompts
 *
 * - both tokenize the prompt to the same ids (else positions would not match),
 * - the last-position logits agree (cosine >= 0.999, and the largest logit
 *   difference within the noise of llama.cpp's F16 flash attention),
 * - classify picks the same token, and 32 greedy tokens (EOS ignored) are the
 *   same ids and the same text, unless a step was a near-tie (see
 *   assertGreedyAgrees).
 *
 * Models: the shared stories260K GGUF; the shared tinystories-656k Hugging
 * Face folder converted to GGUF here the way llama.cpp's converter does
 * (checked against the folder's published greedy output, so agreement is not
 * on a wrongly converted file); and random models of every architecture
 * written by @infer/wasm's test helpers.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it, type TestContext } from "node:test";
import { isTokenizerModel, loadModel, type GenerationResult, type LogitsSummaryPayload, type ProbeEvent, type TextModel } from "@infer/core";
import "../src/index.js";
import { assertGreedyAgrees, cosineSimilarity, maxAbsDifference, spread, topTwo } from "./agreement-compare.js";
import { skipWithoutStories, skipWithoutTinyStories, STORIES_GGUF, TINYSTORIES } from "./fixtures.js";
import { convertHfLlamaToGguf } from "./hf-llama-to-gguf.js";
import { loadWasmKit, wasmBuildMissing, type WasmKit } from "./wasm-link.js";

const GREEDY_TOKENS = 32;
/** The least cosine similarity of the two backends' last-position logits. */
const MIN_COSINE = 0.999;
const CONTEXT = 128;

/**
 * One thread and one slot each (the machine is shared). Otherwise each
 * backend runs with its defaults: that is what users get.
 */
const LLAMA_CPP_LOAD = { backend: "llama_cpp", threads: 1, contextLength: CONTEXT, parallelSlots: 1 } as const;
const WASM_LOAD = { backend: "wasm", threads: 1, contextLength: CONTEXT, parallelSlots: 1 } as const;

/**
 * The largest tolerated |Δlogit| at a prompt's last position, as a share of
 * the spread (standard deviation) of llama.cpp's logits there. The wasm engine
 * computes in float32 throughout; llama.cpp by default runs flash attention
 * (node-llama-cpp's "auto" turns it on for the CPU), which rounds queries,
 * keys and values to F16 (~5e-4 relative each) whatever the KV cache type.
 * Measured: 1e-6 of the spread with flash attention off and an F32 cache,
 * 1.2e-3 with it on, on stories260K's "Once upon a time". Observed here:
 * <= 2.5e-3 of the spread, and <= 3.6e-3 on Gemma 3, whose GELU ggml also
 * reads from an F16 table. At this level the test catches gross
 * disagreements (layouts, tokenization, a missing or misplaced operation);
 * subtle ones are not (stories260K with a 1% RoPE base change or a 10x RMS
 * epsilon on the llama_cpp side measured 1.2e-3 to 2.1e-3 of the spread, no
 * more than flash attention's own noise): those are for packages/wasm's
 * crosscheck, which drives llama.cpp with flash attention off at 1e-5.
 */
const RELATIVE_TOLERANCE = 0.01;

interface Case {
  label: string;
  skip: string | false;
  prompts: string[];
  /** Returns the path of the GGUF file both backends load. */
  prepare(kit: WasmKit, dir: string): Promise<string>;
}

let tinyStoriesGguf: Promise<string> | undefined;

/** The shared tinystories-656k folder as GGUF (converted once per run). */
function convertTinyStories(kit: WasmKit, dir: string): Promise<string> {
  tinyStoriesGguf ??= (async () => {
    const path = join(dir, "tinystories-656k.gguf");
    await convertHfLlamaToGguf(kit, TINYSTORIES, path);
    return path;
  })();
  return tinyStoriesGguf;
}

/** Byte-level prompts of 20+ tokens: past Gemma 3's test window of 8, so its sliding layers mask. */
const RANDOM_PROMPTS = ["Hello there, the answer is in the", "an ancient tower of stones; 42 owls!"];

const CASES: Case[] = [
  {
    label: "stories260K.gguf",
    skip: skipWithoutStories,
    // "" is BOS alone.
    prompts: ["", "Once upon a time", "The little dog was sad because"],
    prepare: async () => STORIES_GGUF,
  },
  {
    label: "tinystories-656k converted to GGUF",
    skip: skipWithoutTinyStories,
    prompts: ["Once upon a time", "Lily and her mom went to the park."],
    prepare: convertTinyStories,
  },
  ...["llama", "qwen2", "qwen3", "gemma3", "phi3"].map(
    (architecture): Case => ({
      label: `random ${architecture}`,
      skip: false,
      prompts: RANDOM_PROMPTS,
      prepare: async (kit, dir) => {
        const path = join(dir, `random-${architecture}.gguf`);
        await kit.writeRandomGguf(path, { architecture, seed: 7 });
        return path;
      },
    }),
  ),
];

describe("the wasm and llama_cpp backends agree on the same GGUF files", { skip: wasmBuildMissing ?? false }, () => {
  let kit: WasmKit;
  let dir: string;
  before(async () => {
    kit = await loadWasmKit();
    dir = await mkdtemp(join(tmpdir(), "infer-agreement-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("tinystories-656k converted to GGUF: llama_cpp reproduces the folder's published greedy ids", { skip: skipWithoutTinyStories }, async () => {
    const expected = JSON.parse(await readFile(join(TINYSTORIES, "expected-greedy-100.json"), "utf8")) as {
      prompt: string;
      prompt_ids: number[];
      greedy_ids: number[];
    };
    const model = await loadModel(await convertTinyStories(kit, dir), LLAMA_CPP_LOAD);
    try {
      assert.ok(isTokenizerModel(model), "llama_cpp exposes its tokenizer");
      assert.deepEqual(model.encode(expected.prompt), expected.prompt_ids, "the converted vocabulary tokenizes the prompt as Hugging Face does");
      const result = await model.generateText(expected.prompt, { temperature: 0, maxTokens: expected.greedy_ids.length, ignoreEos: true });
      assert.deepEqual(
        result.tokens.map((token) => token.id),
        expected.greedy_ids,
        "greedy ids of the converted file vs the published float32 reference",
      );
    } finally {
      await model.close();
    }
  });

  for (const testCase of CASES) {
    it(`${testCase.label}: same prompt tokens, logits, classify token and ${GREEDY_TOKENS} greedy tokens`, { skip: testCase.skip }, async (t) => {
      const path = await testCase.prepare(kit, dir);
      await checkAgreement(t, path, testCase);
    });
  }
});

async function checkAgreement(t: TestContext, path: string, testCase: Case): Promise<void> {
  /** The wasm engine's logits summary at each generated step of the latest call. */
  const wasmSteps: LogitsSummaryPayload[] = [];
  const probe = (event: ProbeEvent) => {
    if (event.kind === "logits") wasmSteps[event.step] = event.payload;
  };
  const wasm = await loadModel(path, { ...WASM_LOAD, probe });
  let llamaCpp: TextModel | undefined;
  try {
    llamaCpp = await loadModel(path, LLAMA_CPP_LOAD);
    await compareModels(t, wasm, llamaCpp, wasmSteps, testCase);
  } finally {
    await llamaCpp?.close();
    await wasm.close();
  }
}

async function compareModels(
  t: TestContext,
  wasm: TextModel,
  llamaCpp: TextModel,
  wasmSteps: LogitsSummaryPayload[],
  testCase: Case,
): Promise<void> {
  const { label, prompts } = testCase;
  assert.ok(isTokenizerModel(wasm) && isTokenizerModel(llamaCpp), "both backends expose their tokenizer");
  for (const prompt of prompts) {
    assert.deepEqual(wasm.encode(prompt), llamaCpp.encode(prompt), `${label}: ${JSON.stringify(prompt)} tokenizes the same`);
  }

  const tolerance = RELATIVE_TOLERANCE;
  const ours = await wasm.classify(prompts, { logits: true, temperature: 0 });
  const theirs = await llamaCpp.classify(prompts, { logits: true, temperature: 0 });
  let logitScale = 0;
  for (const [i, prompt] of prompts.entries()) {
    const where = `${label}, prompt ${JSON.stringify(prompt)}`;
    const a = ours[i]!.logits;
    const b = theirs[i]!.logits;
    assert.ok(a && b, `${where}: classify returned logits on both backends`);
    assert.equal(a.length, b.length, `${where}: vocabulary sizes differ`);
    const cosine = cosineSimilarity(a, b);
    const scale = spread(b);
    const relative = maxAbsDifference(a, b) / scale;
    logitScale = Math.max(logitScale, scale);
    t.diagnostic(`${where}: cosine ${cosine.toFixed(7)}, max |Δlogit| ${relative.toPrecision(2)} of the spread`);
    assert.ok(cosine >= MIN_COSINE, `${where}: cosine ${cosine} < ${MIN_COSINE}`);
    assert.ok(relative <= tolerance, `${where}: max |Δlogit| is ${relative} of the spread, > ${tolerance}`);
    // The chosen token may differ only where llama.cpp's own top two are within the tolerated difference.
    assert.equal(ours[i]!.token.id, topTwo(a).best, `${where}: wasm's greedy classify token is the arg max of its logits`);
    const { best, gap } = topTwo(b);
    assert.equal(theirs[i]!.token.id, best, `${where}: llama_cpp's greedy classify token is the arg max of its logits`);
    if (ours[i]!.token.id !== best) {
      assert.ok(gap <= 2 * tolerance * scale, `${where}: classify chose ${ours[i]!.token.id} vs ${best}, llama_cpp's by ${gap} logits`);
    }
  }

  const options = { temperature: 0, maxTokens: GREEDY_TOKENS, ignoreEos: true };
  const tieMargin = 2 * tolerance * logitScale;
  for (const prompt of prompts) {
    const where = `${label}, greedy from ${JSON.stringify(prompt)}`;
    wasmSteps.length = 0;
    const a: GenerationResult = await wasm.generateText(prompt, options);
    const b: GenerationResult = await llamaCpp.generateText(prompt, options);
    const ids = (tokens: { id: number }[]) => tokens.map((token) => token.id);
    // The probe's summaries are what a near-tie is judged on: they must describe these very steps.
    assert.deepEqual(
      wasmSteps.map((summary) => summary.topIds[0]),
      ids(a.tokens),
      `${where}: wasm's logits probe reports each emitted token as its top choice`,
    );
    const agreed = assertGreedyAgrees(ids(a.tokens), ids(b.tokens), wasmSteps, tieMargin, where);
    t.diagnostic(`${where}: ${agreed}/${GREEDY_TOKENS} tokens identical`);
    if (agreed === GREEDY_TOKENS) assert.equal(a.text, b.text, `${where}: the same tokens give the same text`);
  }
}
