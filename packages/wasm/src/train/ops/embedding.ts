/**
 * The embedding lookup's backward (the forward is kernels/dequant.ts's
 * embeddingLookup): each token's row of the gradient adds into its
 * embedding row. Base embeddings are frozen in LoRA training; this is here
 * for a trainable embedding and for the gradient checks of the chain.
 */
export function embeddingBackward(dEmbedding: Float32Array, dx: Float32Array, tokens: Int32Array, hidden: number, scale = 1): void {
  for (let t = 0; t < tokens.length; t++) {
    const row = tokens[t]! * hidden;
    for (let i = 0; i < hidden; i++) dEmbedding[row + i] = dEmbedding[row + i]! + scale * dx[t * hidden + i]!;
  }
}
