/**
 * Random models of every architecture with their matrices in the K-quants
 * (super-blocks of 256): the engine's last-position logits and greedy
 * decoding against llama.cpp's. Every matrix row must hold whole super-blocks,
 * so these models are wider: hidden 256, FFN 512, 8 heads of 32; one layer
 * each, to keep the engine's reference kernels (which dequantize every row on
 * every matmul) quick. The layer plumbing of each architecture, Gemma 3's
 * local/global layers included, is cross-checked in random-small.test.ts.
 */
import { after, describe, it } from "node:test";
import type { Llama } from "node-llama-cpp";
import { GgmlType } from "@infer/formats";
import type { RandomGgufSpec } from "../../src/testing/index.js";
import { closeLlama, openLlama } from "./llama-oracle.js";
import { ARCHITECTURES, caseLabel, crossCheckRandomModel } from "./random-models.js";

const llama = await openLlama();
const TYPES = [GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K];

describe("random models vs llama.cpp: K-quants", { skip: typeof llama === "string" ? llama : false }, () => {
  after(closeLlama);
  for (const architecture of ARCHITECTURES) {
    for (const type of TYPES) {
      const spec: RandomGgufSpec = { architecture, type, seed: 7, hiddenSize: 256, ffnSize: 512, numHeads: 8, numLayers: 1 };
      it(`${caseLabel(spec)}: logits and greedy decoding match llama.cpp`, (t) => crossCheckRandomModel(t, llama as Llama, spec));
    }
  }
});
