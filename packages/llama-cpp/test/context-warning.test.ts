import { test } from "node:test";
import { loadModel } from "@infer/core";
import { assertContextBeyondTrainingWarns } from "@infer/core/testing";
import "../src/index.js";
import { skipWithoutStories, STORIES_GGUF, TEST_LOAD } from "./fixtures.js";

test("a context beyond the trained length loads with a warning in info(); within it, none", { skip: skipWithoutStories }, () =>
  assertContextBeyondTrainingWarns((contextLength) => loadModel(STORIES_GGUF, { ...TEST_LOAD, parallelSlots: 1, contextLength })),
);
