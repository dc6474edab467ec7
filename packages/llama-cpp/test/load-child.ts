// Run as a child process by corrupt-gguf.test.ts: loads each model path given on the command line
// (`model.gguf::adapter.gguf` loads the model with that LoRA adapter) and, if the load succeeds,
// generates a few tokens; prints one JSON line per path. A load that aborts the process (a llama.cpp
// GGML_ASSERT, a SIGSEGV) kills this child, not the test runner.
import { isInferenceError, loadModel } from "@infer/core";
import "../src/index.js";
import { TEST_LOAD } from "./fixtures.js";

for (const path of process.argv.slice(2)) {
  const started = performance.now();
  const [modelPath, adapterPath] = path.split("::") as [string, string | undefined];
  let outcome: Record<string, unknown>;
  try {
    const model = await loadModel(modelPath, { ...TEST_LOAD, parallelSlots: 1, ...(adapterPath !== undefined && { adapterPath }) });
    try {
      await model.generateText("Once", { temperature: 0, maxTokens: 4 });
      outcome = { loaded: true };
    } finally {
      await model.close();
    }
  } catch (error) {
    outcome = isInferenceError(error) ? { code: error.code, field: error.details?.field, message: error.message } : { other: String(error) };
  }
  console.log(JSON.stringify({ path, ms: Math.round(performance.now() - started), ...outcome }));
}
