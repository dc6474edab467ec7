import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CLASSIFY_OPTION_NAMES,
  DEFAULT_GENERATE_OPTIONS,
  GENERATE_OPTION_NAMES,
  LOAD_OPTION_NAMES,
  InferenceError,
  isInferenceError,
  resolveGenerateOptions,
  validateClassifyOptions,
  validateGenerateOptions,
  validateLoadOptions,
} from "../src/index.js";

/** Asserts INVALID_OPTION whose message names `option` in quotes and whose details carry it. */
function assertRejects(validate: (options: unknown) => void, options: unknown, option: string): void {
  assert.throws(
    () => validate(options),
    (error: unknown) => {
      assert.ok(isInferenceError(error, "INVALID_OPTION"), `expected INVALID_OPTION for ${JSON.stringify(options)}`);
      assert.match(error.message, new RegExp(`'${option}'`), error.message);
      assert.equal(error.details.option, option);
      return true;
    },
  );
}

const signal = new AbortController().signal;

// Per option: values that must pass and values that must fail.
const GENERATE_CASES: Record<string, { good: unknown[]; bad: unknown[] }> = {
  maxTokens: { good: [1, 4096], bad: [0, -1, 1.5, "10", Number.NaN] },
  temperature: { good: [0, 0.7, 2, 100], bad: [-0.1, 101, Number.NaN, Infinity, "1"] },
  topK: { good: [0, 1, 40], bad: [-1, 2.5, "40"] },
  topP: { good: [0.01, 0.95, 1], bad: [0, -0.5, 1.01, Number.NaN] },
  minP: { good: [0, 0.05, 1], bad: [-0.01, 1.5] },
  repeatPenalty: { good: [1, 1.1, 0.5], bad: [0, -1, 101] },
  repeatLastN: { good: [0, 64], bad: [-1, 3.3] },
  seed: { good: [0, 42, Number.MAX_SAFE_INTEGER], bad: [-1, 1.5, Number.MAX_SAFE_INTEGER + 2, "7"] },
  stopTokens: { good: [[], [0, 2]], bad: [[-1], [1.5], 3, ["a"]] },
  stopStrings: { good: [[], ["\n", "END"]], bad: [[""], "END", [3]] },
  ignoreEos: { good: [true, false], bad: [1, "yes"] },
  logits: { good: [true], bad: ["true"] },
  logprobs: { good: [0, 5, 20], bad: [-1, 21, 1.5, "3"] },
  signal: { good: [signal], bad: [{}, "signal", { aborted: false }] },
  idleTimeoutMs: { good: [0, 1, 60_000], bad: [-1, 1.5, "60s", Infinity] },
  chatTemplate: { good: ["{{ messages }}"], bad: ["", 3] },
  jsonSchema: { good: [{ type: "object" }], bad: [[], "schema", null] },
  grammar: { good: ['root ::= "a"'], bad: ["", 1] },
};

const LOAD_CASES: Record<string, { good: unknown[]; bad: unknown[] }> = {
  backend: { good: ["wasm"], bad: ["", 1] },
  contextLength: { good: [1, 8192], bad: [0, 1.5, "2048"] },
  gpuLayers: { good: [-1, 0, 99], bad: [-2, 0.5] },
  parallelSlots: { good: [1, 4], bad: [0] },
  threads: { good: [1, 8], bad: [0, -4] },
  adapterPath: { good: ["/tmp/adapter"], bad: [""] },
  probe: { good: [() => undefined, { emit: () => undefined }, [() => undefined]], bad: [3, {}, [() => undefined, 1]] },
  draftModel: { good: ["/tmp/draft.gguf"], bad: [""] },
  quantize: { good: ["q8_0", "Q4_K", "f16"], bad: ["q3", 8] },
  kvType: { good: ["f16", "Q8_0"], bad: ["q4_0", "int8"] },
  batchSize: { good: [1, 512], bad: [0, 2.5, "64"] },
  promptCacheBytes: { good: [0, 64 * 2 ** 20], bad: [-1, 1.5, "1MB"] },
  isolate: { good: [true, false], bad: ["yes", 1] },
  onProgress: { good: [() => undefined], bad: ["log", { phase: "load" }] },
  remote: {
    good: [{}, { model: "m", apiKey: "k", headers: { "x-a": "b" }, timeoutMs: 1, maxRetries: 0, maxConcurrency: 16 }],
    bad: ["http://h", null, { timeoutMs: 0 }, { maxRetries: -1 }, { headers: { a: 1 } }, { model: "" }, { api_key: "k" }],
  },
};

describe("generate options", () => {
  for (const [option, { good, bad }] of Object.entries(GENERATE_CASES)) {
    it(`${option}: accepts ${good.length} valid values and rejects ${bad.length} invalid ones by name`, () => {
      for (const value of good) validateGenerateOptions({ [option]: value });
      for (const value of bad) assertRejects(validateGenerateOptions, { [option]: value }, option);
    });
  }

  it("the cases cover every generate option", () => {
    // A new option must come with cases here.
    assert.deepEqual(Object.keys(GENERATE_CASES).sort(), [...GENERATE_OPTION_NAMES].sort());
  });

  it("unknown options are rejected with a hint when close to a real one", () => {
    assertRejects(validateGenerateOptions, { max_tokens: 5 }, "max_tokens");
    assert.throws(() => validateGenerateOptions({ max_tokens: 5 }), /did you mean 'maxTokens'/);
    assert.throws(() => validateGenerateOptions({ Temperature: 1 }), /did you mean 'temperature'/);
    assert.throws(() => validateGenerateOptions({ banana: 1 }), (e: Error) => !/did you mean/.test(e.message));
  });

  it("undefined values are ignored; non-objects are rejected", () => {
    validateGenerateOptions(undefined);
    validateGenerateOptions({ temperature: undefined, maxTokens: undefined });
    for (const options of [null, 3, "fast", [1]]) {
      assert.throws(() => validateGenerateOptions(options), (e) => isInferenceError(e, "INVALID_OPTION"));
    }
  });

  it("the message shows the bad value", () => {
    assert.throws(() => validateGenerateOptions({ temperature: -2 }), /got -2/);
    assert.throws(() => validateGenerateOptions({ stopStrings: [""] }), /got array of 1/);
  });

  it("resolveGenerateOptions fills documented defaults and keeps given values", () => {
    const resolved = resolveGenerateOptions({ temperature: 0, maxTokens: 3, topK: undefined });
    assert.equal(resolved.temperature, 0);
    assert.equal(resolved.maxTokens, 3);
    assert.equal(resolved.topK, DEFAULT_GENERATE_OPTIONS.topK);
    assert.equal(resolved.topP, 0.95);
    assert.equal(resolved.minP, 0.05);
    assert.equal(resolved.repeatPenalty, 1);
    assert.equal(resolved.repeatLastN, 64);
    assert.deepEqual(resolved.stopTokens, []);
    assert.deepEqual(resolved.stopStrings, []);
    assert.deepEqual(resolveGenerateOptions().temperature, 0.8);
    assert.throws(() => resolveGenerateOptions({ topP: 2 }), InferenceError);
  });
});

describe("classify options", () => {
  it("accepts the sampling subset and rejects generation-only options by name", () => {
    validateClassifyOptions({ temperature: 0, topK: 5, topP: 0.9, minP: 0.1, seed: 1, logits: true, signal });
    const generationOnly = GENERATE_OPTION_NAMES.filter((name) => !CLASSIFY_OPTION_NAMES.includes(name));
    assert.ok(generationOnly.includes("maxTokens"));
    for (const option of generationOnly) {
      assertRejects(validateClassifyOptions, { [option]: 1 }, option);
    }
    assertRejects(validateClassifyOptions, { temperature: -1 }, "temperature");
  });
});

describe("load options", () => {
  for (const [option, { good, bad }] of Object.entries(LOAD_CASES)) {
    it(`${option}: accepts valid values and rejects invalid ones by name`, () => {
      for (const value of good) validateLoadOptions({ [option]: value });
      for (const value of bad) assertRejects(validateLoadOptions, { [option]: value }, option);
    });
  }

  it("the cases cover every load option", () => {
    assert.deepEqual(Object.keys(LOAD_CASES).sort(), [...LOAD_OPTION_NAMES].sort());
  });

  it("unknown load options are rejected", () => {
    assertRejects(validateLoadOptions, { context_length: 10 }, "context_length");
    assert.throws(() => validateLoadOptions({ context_length: 10 }), /did you mean 'contextLength'/);
  });
});
