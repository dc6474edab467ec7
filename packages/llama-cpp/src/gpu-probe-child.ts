/**
 * The child process of gpu-probe.ts: `node gpu-probe-child.js <gpu> <model.gguf>` loads the
 * model with every layer on that llama.cpp flavour and decodes two tokens. Exit 0: the flavour
 * works here; anything else (an error, or llama.cpp aborting the process) means it does not.
 */
async function runProbe(gpu: string, modelPath: string): Promise<void> {
  const { getLlama, LlamaCompletion, LlamaLogLevel } = await import("node-llama-cpp");
  const llama = await getLlama({
    gpu: gpu === "false" ? false : (gpu as "cuda" | "vulkan" | "metal"),
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  });
  if (String(llama.gpu) !== gpu) throw new Error(`asked for ${gpu}, node-llama-cpp gave ${String(llama.gpu)}`);
  const model = await llama.loadModel({ modelPath, gpuLayers: "max" });
  const context = await model.createContext({ contextSize: 64 });
  const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
  await completion.generateCompletion("ab", { maxTokens: 2, temperature: 0 });
  await llama.dispose();
}

const [gpu, modelPath] = process.argv.slice(2);
runProbe(gpu ?? "", modelPath ?? "").then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
