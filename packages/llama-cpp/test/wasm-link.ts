/**
 * A test-only link to @infer/wasm's build output: importing its index
 * registers backend "wasm" with the same @infer/core registry this package
 * uses, and its testing and formats modules write the GGUF files both
 * backends read. Loaded dynamically from packages/wasm/dist (as the
 * conformance test does) so this package keeps no dependency on @infer/wasm;
 * the types below are the few signatures the agreement test calls.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const WASM_DIST = new URL("../../../wasm/dist/src/", import.meta.url);
const distUrl = (path: string) => new URL(path, WASM_DIST);

/** A `skip` reason when @infer/wasm has not been built, else undefined. */
export const wasmBuildMissing: string | undefined = ["index.js", "testing/index.js", "formats/index.js"]
  .map((path) => fileURLToPath(distUrl(path)))
  .filter((path) => !existsSync(path))
  .map((path) => `needs @infer/wasm's build output ${path} (build packages/wasm first)`)[0];

/** An explicitly typed GGUF metadata value ({ type: GgufValueType.FLOAT32, value: 1e-6 }). */
export interface TypedGgufValue {
  type: number;
  value: number | boolean | string;
}
export type GgufValueInput = TypedGgufValue | string | boolean | string[] | Float32Array | Int32Array;

export interface GgufTensorSpec {
  name: string;
  /** ggml order: shape[0] is the row length. */
  shape: number[];
  type: number;
  data: Float32Array;
}

export interface SafetensorsTensor {
  name: string;
  dtype: string;
  /** Row-major, outermost first. */
  shape: number[];
}

export interface WasmKit {
  writeRandomGguf(path: string, spec: { architecture: string; seed: number; type?: number }): Promise<unknown>;
  /** llama.cpp's HF→GGUF row permutation of llama q/k weights (rotate_half pairs to adjacent pairs). */
  permuteForNormalRope(hf: Float32Array, heads: number, headDim: number): Float32Array;
  readSafetensorsModel(folder: string): Promise<{ tensors: Map<string, SafetensorsTensor>; metadata: Record<string, string> }>;
  toFloat32(tensor: SafetensorsTensor): Float32Array;
  writeGgufFile(path: string, spec: { metadata: Record<string, GgufValueInput>; tensors: GgufTensorSpec[] }): Promise<void>;
  GgufValueType: { UINT32: number; FLOAT32: number };
  GgmlType: { F32: number };
}

let kit: Promise<WasmKit> | undefined;

/** Imports @infer/wasm's build once (registering backend "wasm") and returns its test helpers. */
export function loadWasmKit(): Promise<WasmKit> {
  kit ??= (async () => {
    await import(distUrl("index.js").href);
    const testing = (await import(distUrl("testing/index.js").href)) as Pick<WasmKit, "writeRandomGguf" | "permuteForNormalRope">;
    const formats = (await import(distUrl("formats/index.js").href)) as Omit<WasmKit, "writeRandomGguf" | "permuteForNormalRope">;
    return {
      writeRandomGguf: testing.writeRandomGguf,
      permuteForNormalRope: testing.permuteForNormalRope,
      readSafetensorsModel: formats.readSafetensorsModel,
      toFloat32: formats.toFloat32,
      writeGgufFile: formats.writeGgufFile,
      GgufValueType: formats.GgufValueType,
      GgmlType: formats.GgmlType,
    };
  })();
  return kit;
}
