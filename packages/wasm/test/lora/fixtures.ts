/** The PEFT fixture (scripts/reference/peft_adapter.py) and helpers the LoRA tests share. */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Transformer } from "../../src/engine/transformer.js";
import { SHARED_MODELS } from "../engine/helpers.js";

/** dist/test/lora/*.js → packages/wasm/test/fixtures/lora. */
export const LORA_FIXTURES = fileURLToPath(new URL("../../../test/fixtures/lora/", import.meta.url));
export const PEFT_ADAPTER = join(LORA_FIXTURES, "peft-adapter");
/** An adapter our trainer saved (scripts/reference/infer_adapter.mjs), and what PEFT made of it (peft_adapter.py --check-ours). */
export const INFER_ADAPTER = join(LORA_FIXTURES, "infer-adapter");

export interface PeftCheck {
  inputIds: number[];
  warnings: string[];
  logits: number[];
}

export async function readPeftCheck(): Promise<PeftCheck> {
  return JSON.parse(await readFile(`${INFER_ADAPTER}-peft.json`, "utf8")) as PeftCheck;
}
export const TINYSTORIES = join(SHARED_MODELS, "tinystories-656k");

export interface PeftLogits {
  prompt: string;
  inputIds: number[];
  rank: number;
  alpha: number;
  targetModules: string[];
  baseLogits: number[];
  adapterLogits: number[];
}

export async function readPeftLogits(): Promise<PeftLogits> {
  return JSON.parse(await readFile(join(LORA_FIXTURES, "peft-logits.json"), "utf8")) as PeftLogits;
}

/** The logits of the last of `ids`, fed as one batch into a fresh cache. */
export function lastLogits(transformer: Transformer, ids: readonly number[]): Float32Array {
  return transformer.forward(
    {
      tokens: Int32Array.from(ids),
      positions: Int32Array.from(ids, (_, i) => i),
      seqIds: new Int32Array(ids.length),
      logitRows: Int32Array.of(ids.length - 1),
    },
    transformer.createCache(1, ids.length),
  );
}
