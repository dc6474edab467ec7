// Page-side helpers of the browser tests (packages/wasm/test/browser/*.test.ts), imported in
// headless Chromium next to the browser bundle: each returns plain data for the test to assert on.

export const absolute = (url) => new URL(url, globalThis.location.href).href;

/** Greedy generation from a model source (a URL, or a Blob/bytes made from one), with the progress events seen. */
export async function greedy(infer, source, { prompt = "", maxTokens, as = "url", threads, loadOptions = {} } = {}) {
  const progress = [];
  // Model strings are absolute URLs (any other string is a file path, which a page has none of).
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

/** What the OPFS model cache holds, after planting the data of a download that never finished under `cutKey`. */
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
