import { test } from "node:test";
import { loadModel } from "@infer/core";
import { assertControlTokensSilent } from "@infer/core/testing";
import "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

// stories260K separates its training stories with BOS: greedy from BOS emits one at token 346.
test("a BOS generated mid-stream adds no text", { skip: skipWithoutStories }, async () => {
  await using model = await loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1, contextLength: 512 });
  await assertControlTokensSilent(model, "", 360);
});
