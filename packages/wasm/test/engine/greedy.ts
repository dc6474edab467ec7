/** Greedy decoding on a Transformer and GGUF-vocabulary decoding, shared by the real-model tests. */
import type { KVCache } from "../../src/engine/cache.js";
import type { Transformer } from "../../src/engine/transformer.js";
import { argmax } from "./helpers.js";

/** Feeds `prompt` in one batch, then greedily extends it by `count` tokens, one forward per token. */
export function greedy(transformer: Transformer, cache: KVCache, prompt: number[], count: number): number[] {
  let logits = transformer.forward(
    {
      tokens: Int32Array.from(prompt),
      positions: Int32Array.from(prompt, (_, i) => i),
      seqIds: new Int32Array(prompt.length),
      logitRows: Int32Array.of(prompt.length - 1),
    },
    cache,
  );
  const generated: number[] = [];
  for (let position = prompt.length; generated.length < count; position++) {
    const next = argmax(logits);
    generated.push(next);
    if (generated.length === count) break;
    logits = transformer.forward(
      { tokens: Int32Array.of(next), positions: Int32Array.of(position), seqIds: Int32Array.of(0), logitRows: Int32Array.of(0) },
      cache,
    );
  }
  return generated;
}

/** SentencePiece-style decoding from the GGUF vocabulary: ▁ is a space, <0xNN> is a byte. */
export function decodeWithGgufVocab(tokens: string[], ids: number[]): string {
  const bytes: number[] = [];
  const encoder = new TextEncoder();
  for (const id of ids) {
    const piece = tokens[id]!;
    const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
    if (byte) bytes.push(parseInt(byte[1]!, 16));
    else bytes.push(...encoder.encode(piece.replaceAll("▁", " ")));
  }
  return new TextDecoder().decode(Uint8Array.from(bytes));
}
