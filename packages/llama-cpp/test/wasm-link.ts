/**
 * A test-only link to @infer/wasm's build output: importing its index
 * registers backend "wasm" with the same @infer/core registry this package
 * uses, and its testing module writes the random models both backends read
 * (other GGUF files are read and written with @infer/formats, a dependency).
 * Loaded dynamically from packages/wasm/dist (as the conformance test does)
 * so this package keeps no dependency on @infer/wasm; the types below are the
 * few signatures the agreement test calls.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const WASM_DIST = new URL("../../../wasm/dist/src/", import.meta.url);
const distUrl = (path: string) => new URL(path, WASM_DIST);

/** A `skip` reason when @infer/wasm has not been built, else undefined. */
export const wasmBuildMissing: string | undefined = ["index.js", "testing/index.js"]
  .map((path) => fileURLToPath(distUrl(path)))
  .filter((path) => !existsSync(path))
  .map((path) => `needs @infer/wasm's build output ${path} (build packages/wasm first)`)[0];

export interface WasmKit {
  writeRandomGguf(path: string, spec: { architecture: string; seed: number; type?: number; vocabSize?: number }): Promise<unknown>;
  /** llama.cpp's HF→GGUF row permutation of llama q/k weights (rotate_half pairs to adjacent pairs). */
  permuteForNormalRope(hf: Float32Array, heads: number, headDim: number): Float32Array;
}

let kit: Promise<WasmKit> | undefined;

/** Imports @infer/wasm's build once (registering backend "wasm") and returns its test helpers. */
export function loadWasmKit(): Promise<WasmKit> {
  kit ??= (async () => {
    await import(distUrl("index.js").href);
    const testing = (await import(distUrl("testing/index.js").href)) as WasmKit;
    return { writeRandomGguf: testing.writeRandomGguf, permuteForNormalRope: testing.permuteForNormalRope };
  })();
  return kit;
}
