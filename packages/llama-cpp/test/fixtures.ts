import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type ErrorCode, isInferenceError } from "@infer/core";

/**
 * The shared test models live beside the repository (../shared/models from its
 * root). Compiled tests run from packages/llama-cpp/dist/test/, five levels below
 * the folder that holds both.
 */
export const MODELS_DIR = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
export const STORIES_GGUF = `${MODELS_DIR}stories260K/stories260K.gguf`;
export const STORIES_EXPECTED = `${MODELS_DIR}stories260K/expected-greedy-200.txt`;

/** A `skip` value for node:test: false when the model is here, else why the test cannot run. */
export const skipWithoutStories: string | false = existsSync(STORIES_GGUF)
  ? false
  : `needs ${STORIES_GGUF} (the shared test models are absent in this checkout)`;

/** The shared tinystories-656k Hugging Face folder (tests convert it to GGUF). */
export const TINYSTORIES = `${MODELS_DIR}tinystories-656k`;
export const skipWithoutTinyStories: string | false = existsSync(`${TINYSTORIES}/model.safetensors`)
  ? false
  : `needs ${TINYSTORIES} (the shared test models are absent in this checkout)`;

/**
 * Small, fast settings for every test load: a small context, 4 slots, one
 * thread. One thread on purpose: tests run beside other work on small CI
 * machines, and llama.cpp's spinning thread barrier makes 2 threads on 2 busy
 * cores several times slower than 1.
 */
export const TEST_LOAD = { backend: "llama_cpp", threads: 1, contextLength: 256, parallelSlots: 4 } as const;

/** For assert.rejects: an InferenceError with this code whose message names each fragment. */
export const rejectsWith = (code: ErrorCode, ...fragments: string[]) => (error: unknown) => {
  assert.ok(isInferenceError(error), `expected an InferenceError, got ${String(error)}`);
  assert.equal(error.code, code, error.message);
  for (const fragment of fragments) assert.ok(error.message.includes(fragment), `"${error.message}" lacks "${fragment}"`);
  return true;
};
