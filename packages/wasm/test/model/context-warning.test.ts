import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import { assertContextBeyondTrainingWarns } from "@infer/core/testing";
import "../../src/index.js";

const gguf = fileURLToPath(new URL("../../../../../../shared/models/stories260K/stories260K.gguf", import.meta.url));
const skip = existsSync(gguf) ? undefined : `needs ${gguf} (the shared test models are absent in this checkout)`;

test("a context beyond the trained length loads with a warning in info(); within it, none", { skip }, () =>
  assertContextBeyondTrainingWarns((contextLength) => loadModel(gguf, { backend: "wasm", threads: 1, parallelSlots: 1, contextLength })),
);
