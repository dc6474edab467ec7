/**
 * The warm-up generation at load (WasmLoadOptions.warmUp) leaves no trace: the
 * first generation after it equals one without it, token for token and in its
 * log-probabilities and metrics, also where the context is shorter than the
 * warm-up would take; a warmUp that is not a boolean is INVALID_OPTION.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { isInferenceError, type ProbeEvent } from "@infer/core";
import { GgmlType } from "@infer/formats";
import { loadWasmModel } from "../../src/index.js";
import { writeRandomGguf } from "../../src/testing/index.js";

const dir = await mkdtemp(join(tmpdir(), "infer-wasm-warm-up-"));
const path = join(dir, "model.gguf");
after(() => rm(dir, { recursive: true, force: true }));
before(() => writeRandomGguf(path, { architecture: "llama", seed: 11, type: GgmlType.Q8_0, hiddenSize: 128, ffnSize: 256, numLayers: 2 }));

const OPTIONS = { temperature: 0, maxTokens: 10, ignoreEos: true, logprobs: 3 };

async function firstGeneration(warmUp: boolean, contextLength?: number) {
  const events: ProbeEvent[] = [];
  await using model = await loadWasmModel(path, { warmUp, contextLength, threads: 2, probe: { emit: (event) => events.push(event) } });
  const eventsAtLoad = events.length;
  const result = await model.generateText("warm or cold", OPTIONS);
  const { promptTokens, generatedTokens, activeMemoryBytes } = model.metrics();
  return { run: { eventsAtLoad, tokens: JSON.parse(JSON.stringify(result.tokens)) as unknown, promptTokens, generatedTokens }, activeMemoryBytes };
}

test("the first generation after the warm-up equals one without it", async () => {
  const cold = await firstGeneration(false);
  const warmed = await firstGeneration(true);
  assert.equal(warmed.run.eventsAtLoad, 0, "the warm-up emitted probe events");
  assert.equal(warmed.run.generatedTokens, OPTIONS.maxTokens);
  assert.deepEqual(warmed.run, cold.run);
  // It ran: its prompt, longer than this one, left the forward scratch larger.
  assert.ok(warmed.activeMemoryBytes! > cold.activeMemoryBytes!, `${warmed.activeMemoryBytes} <= ${cold.activeMemoryBytes}`);
});

test("a context shorter than the warm-up's prompt and steps still warms up and leaves no trace", async () => {
  assert.deepEqual((await firstGeneration(true, 24)).run, (await firstGeneration(false, 24)).run);
});

test("warmUp must be a boolean", async () => {
  await assert.rejects(
    loadWasmModel(path, { warmUp: "yes" as unknown as boolean }),
    (error) => isInferenceError(error, "INVALID_OPTION") && /warmUp/.test(error.message),
  );
});
