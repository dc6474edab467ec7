/**
 * Random models of every architecture, written by our GGUF writer with their
 * matrices in F32, F16, BF16 and the 32-element block quantizations: the
 * engine's last-position logits and greedy decoding against llama.cpp's.
 * Default dimensions (hidden 64): every row length is a multiple of 32.
 */
import { after, describe, it } from "node:test";
import type { Llama } from "node-llama-cpp";
import { GgmlType } from "@infer/formats";
import { closeLlama, openLlama } from "./llama-oracle.js";
import { ARCHITECTURES, caseLabel, crossCheckRandomModel } from "./random-models.js";

const llama = await openLlama();
const TYPES = [GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1];

describe("random models vs llama.cpp: float and 32-block types", { skip: typeof llama === "string" ? llama : false }, () => {
  after(closeLlama);
  for (const architecture of ARCHITECTURES) {
    for (const type of TYPES) {
      const spec = { architecture, type, seed: 7 };
      it(`${caseLabel(spec)}: logits and greedy decoding match llama.cpp`, (t) => crossCheckRandomModel(t, llama as Llama, spec));
    }
  }
});
