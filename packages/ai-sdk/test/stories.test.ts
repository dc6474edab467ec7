import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { generateText, streamText } from "ai";
import { createInfer } from "../src/index.js";

// dist/test/ -> the repository root is four levels up; the shared models sit beside it.
const models = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));
const gguf = `${models}stories260K/stories260K.gguf`;
const skip = existsSync(gguf) ? false : `needs ${gguf} (the shared test models are not here)`;

test("generateText and streamText on stories260K by path, in-process", { skip, timeout: 120_000 }, async () => {
  const expected = readFileSync(`${models}stories260K/expected-greedy-200.txt`, "utf8").replace(/\n$/, "");
  const infer = createInfer({ load: { threads: 1 } });
  try {
    // stories260K is a base model: "completion" sends the prompt as plain text (BOS + nothing = llama2.c's test).
    const model = infer(gguf, { promptMode: "completion" });
    const result = await generateText({ model, prompt: "", maxOutputTokens: 200, temperature: 0 });
    assert.equal(result.text, expected);
    assert.equal(result.finishReason, "length");
    assert.equal(result.usage.outputTokens, 200);
    const streamed = streamText({ model, prompt: "", maxOutputTokens: 50, temperature: 0 });
    let text = "";
    for await (const delta of streamed.textStream) text += delta;
    assert.ok(text.length > 50 && expected.startsWith(text), text);
  } finally {
    await infer.close();
  }
});
