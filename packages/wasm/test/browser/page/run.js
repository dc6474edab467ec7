// Page-side helpers of the browser tests (packages/wasm/test/browser/*.test.ts), imported in
// headless Chromium next to the browser bundle: each returns plain data for the test to assert on.

// In a page, a model string is an absolute URL (any other string is a file path, which a page has
// none of); the training helpers also run in Node, to compare, where they are given paths.
export const absolute = (url) => (globalThis.location === undefined ? url : new URL(url, globalThis.location.href).href);

/** Greedy generation from a model source (a URL, or a Blob/bytes made from one), with the progress events seen. */
export async function greedy(infer, source, { prompt = "", maxTokens, as = "url", threads, loadOptions = {} } = {}) {
  const progress = [];
  let input = absolute(source);
  if (as !== "url") {
    const response = await fetch(input);
    input = as === "blob" ? await response.blob() : await response.arrayBuffer();
  }
  const onProgress = (event) => progress.push(event);
  let kernels;
  if (threads !== undefined) kernels = await infer.createWasmKernels({ threads });
  // The backend's own options (kernels, cache) go to loadWasmModel; core's loadModel takes only its own.
  const model =
    kernels || "cache" in loadOptions
      ? await infer.loadWasmModel(input, { ...loadOptions, onProgress, kernels })
      : await infer.loadModel(input, { ...loadOptions, onProgress });
  try {
    const result = await model.generateText(prompt, { maxTokens, temperature: 0 });
    return { text: result.text, ids: result.tokens.map((token) => token.id), progress, kernels: kernels?.name, backend: model.backend };
  } finally {
    await model.close();
    await kernels?.dispose();
  }
}

/** The InferenceError code and message a load fails with (or "loaded" when it does not fail). */
export async function loadError(infer, source, { as = "url", loadOptions = {} } = {}) {
  let input = as === "bytes" ? new TextEncoder().encode(source) : source.startsWith("/") ? absolute(source) : source;
  // A File of 5 GiB whose first bytes say GGUF, without the memory behind it: what a drop of a too large model looks like.
  if (as === "huge") input = hugeGguf(source);
  try {
    const model = await infer.loadModel(input, loadOptions);
    await model.close();
    return { code: "loaded" };
  } catch (error) {
    return { code: error.code, message: error.message, isInferenceError: error instanceof infer.InferenceError };
  }
}

/** What the OPFS model cache holds, after planting the data of a download that never finished under the name `plantCut`. */
export async function cacheState(infer, { plantCut } = {}) {
  if (plantCut) {
    const root = await globalThis.navigator.storage.getDirectory();
    const folder = await root.getDirectoryHandle("infer-models", { create: true });
    const writable = await (await folder.getFileHandle(plantCut, { create: true })).createWritable();
    await writable.write(new Uint8Array([71, 71, 85, 70, 3, 0]));
    await writable.close();
  }
  const listed = await infer.listCachedModels();
  const root = await globalThis.navigator.storage.getDirectory();
  const folder = await root.getDirectoryHandle("infer-models", { create: true });
  const files = [];
  for await (const name of folder.keys()) files.push(name);
  return { listed, files: files.sort() };
}

/** Starts loading a model without waiting for it: the bytes it has so far are in globalThis.loadedBytes (a test closes the tab mid-way). */
export function startLoad(infer, source) {
  globalThis.loadedBytes = 0;
  void infer.loadModel(absolute(source), { onProgress: (event) => (globalThis.loadedBytes = event.loadedBytes) }).then(
    (model) => model.close(),
    () => undefined,
  );
}

export async function deleteCached(infer, url) {
  return infer.deleteCachedModel(absolute(url));
}

function hugeGguf(name) {
  const magic = new TextEncoder().encode("GGUF");
  const file = {
    name,
    size: 5 * 2 ** 30,
    slice: (start = 0, end = file.size) => new Blob([magic.slice(start, Math.min(end, magic.length))]),
    arrayBuffer: async () => {
      throw new Error("a 5 GiB file is never read whole");
    },
  };
  return file;
}

// The training helpers run the same in a page and in Node (the tests compare the two): the
// kernels are built as asked (threads, relaxed SIMD or not), and results come back as plain data.

/** The model at `source` on kernels of its own: `use(model)`'s result, the model closed after. */
async function withTrainable(infer, source, kernelOptions, use) {
  const kernels = await infer.createWasmKernels(kernelOptions);
  const model = await infer.loadWasmModel(absolute(source), { kernels, contextLength: 64, parallelSlots: 1, warmUp: false });
  try {
    return { kernels: kernels.name, ...(await use(model)) };
  } finally {
    await model.close();
    await kernels.dispose();
  }
}

/**
 * A few trainStep calls on one batch: the losses, the gradient norms, the adapter's PEFT files
 * (byte arrays as plain arrays) and the trained model's last-position logits for `probe`.
 */
export async function trainSteps(infer, source, { texts, steps, lora, learningRate, probe, kernels }) {
  return withTrainable(infer, source, kernels, async (model) => {
    const adapter = model.applyLoRA(lora);
    const batch = { inputIds: texts.map((text) => model.encode(text)) };
    const results = [];
    for (let step = 0; step < steps; step++) results.push(await model.trainStep(batch, { learningRate }));
    const files = Object.fromEntries(Object.entries(await adapter.peftFiles()).map(([name, bytes]) => [name, Array.from(bytes)]));
    const [scored] = await model.classify([probe], { logits: true });
    return { losses: results.map((r) => r.loss), gradNorms: results.map((r) => r.gradNorm), files, logits: Array.from(scored.logits) };
  });
}

/** @infer/core's train() over a JSONL text's examples, checkpointing to memory: its history and the checkpoints' steps. */
export async function trainLoop(infer, source, { jsonl, lora, options, kernels }) {
  return withTrainable(infer, source, kernels, async (model) => {
    model.applyLoRA(lora);
    const examples = model.jsonlExamples(jsonl, "train.jsonl");
    const saved = [];
    const checkpoints = {
      save: async (checkpoint) => void saved.push(checkpoint),
      load: async () => saved.at(-1),
    };
    const result = await infer.train(model, examples, { ...options, evalExamples: examples.slice(0, 1), checkpoints });
    return { history: result.history, steps: result.steps, checkpointSteps: saved.map((c) => c.trainer.step) };
  });
}

/** How a trainStep before any applyLoRA fails, on a model loaded through the contract; with `save`, how adapter.save fails after. */
export async function trainingMisuse(infer, source, { save = false } = {}) {
  const failure = (error) => ({ code: error.code, message: error.message, isInferenceError: error instanceof infer.InferenceError });
  const model = await infer.loadTrainable(absolute(source), { threads: 1, contextLength: 64, parallelSlots: 1 });
  try {
    const trainStep = await model.trainStep({ inputIds: [model.encode("Tom had a dog.")] }).then(() => ({ code: "trained" }), failure);
    if (!save) return { trainStep };
    return { trainStep, save: await model.applyLoRA().save("adapter").then(() => ({ code: "saved" }), failure) };
  } finally {
    await model.close();
  }
}
