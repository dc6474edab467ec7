/** Baking a pair into its base weight: W += scale * B A, on float32 rows. */
import { pairScale, type LoraAdapter, type LoraPair } from "./adapter.js";

/** w [outFeatures, inFeatures] row-major, in place. */
export function mergePairInto(w: Float32Array, adapter: Pick<LoraAdapter, "alpha" | "useRslora">, pair: LoraPair): void {
  const { rank, inFeatures, outFeatures, a, b } = pair;
  const scale = pairScale(adapter, pair);
  const row = new Float64Array(inFeatures);
  for (let o = 0; o < outFeatures; o++) {
    row.fill(0);
    for (let j = 0; j < rank; j++) {
      const bj = b[o * rank + j]!;
      if (bj === 0) continue;
      const aRow = j * inFeatures;
      for (let i = 0; i < inFeatures; i++) row[i]! += bj * a[aRow + i]!;
    }
    const at = o * inFeatures;
    for (let i = 0; i < inFeatures; i++) w[at + i] = w[at + i]! + scale * row[i]!;
  }
}
