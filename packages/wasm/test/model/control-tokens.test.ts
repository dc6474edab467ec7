import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import { assertControlTokensSilent } from "@infer/core/testing";
import "../../src/index.js";

const gguf = fileURLToPath(new URL("../../../../../../shared/models/stories260K/stories260K.gguf", import.meta.url));
const skip = existsSync(gguf) ? undefined : `needs ${gguf} (the shared test models are absent in this checkout)`;

// stories260K separates its training stories with BOS: greedy from BOS emits one at token 346.
test("a BOS generated mid-stream adds no text", { skip }, async () => {
  await using model = await loadModel(gguf, { backend: "wasm", threads: 1, parallelSlots: 1, contextLength: 512 });
  await assertControlTokensSilent(model, "", 360);
});
