/**
 * q/k row orders. Hugging Face llama checkpoints pair rotary dimensions by
 * halves (row r with r + headDim/2); llama.cpp's "llama" GGUF files, converted
 * from them, pair neighbours (2i with 2i + 1), each head's rows permuted. A
 * LoRA B of q_proj or k_proj has its weight's rows, so it moves with them.
 */
import type { LoraAdapter, LoraLayout, LoraPair } from "./adapter.js";

/** [heads * headDim, cols] from split-half rotary pairs to interleaved ones, head by head. */
export function permuteRotaryRows(values: Float32Array, heads: number, cols: number): Float32Array {
  return moveRotaryRows(values, heads, cols, true);
}

/** The inverse of permuteRotaryRows: interleaved pairs back to split halves. */
export function unpermuteRotaryRows(values: Float32Array, heads: number, cols: number): Float32Array {
  return moveRotaryRows(values, heads, cols, false);
}

function moveRotaryRows(values: Float32Array, heads: number, cols: number, toInterleaved: boolean): Float32Array {
  const headDim = values.length / cols / heads;
  const half = headDim / 2;
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const split = h * headDim + s * half + i;
        const interleaved = h * headDim + 2 * i + s;
        const [from, to] = toInterleaved ? [split, interleaved] : [interleaved, split];
        out.set(values.subarray(from * cols, (from + 1) * cols), to * cols);
      }
    }
  }
  return out;
}

/** Whether a base of this architecture stores q/k rows differently in GGUF and Hugging Face files. */
export function permutesQK(architecture: string): boolean {
  return architecture === "llama";
}

/** The adapter with its q/k B rows in `layout`'s order for a base of `architecture` (itself when nothing moves). */
export function inLayout(
  adapter: LoraAdapter,
  layout: LoraLayout,
  architecture: string,
  heads: { numHeads: number; numKVHeads: number },
): LoraAdapter {
  if (adapter.layout === layout) return adapter;
  if (!permutesQK(architecture)) return { ...adapter, layout };
  const move = layout === "gguf" ? permuteRotaryRows : unpermuteRotaryRows;
  const pairs = adapter.pairs.map((pair): LoraPair => {
    if (pair.module !== "q_proj" && pair.module !== "k_proj") return pair;
    const count = pair.module === "q_proj" ? heads.numHeads : heads.numKVHeads;
    return { ...pair, b: move(pair.b, count, pair.rank) };
  });
  return { ...adapter, layout, pairs };
}
