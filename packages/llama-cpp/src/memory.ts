import { totalmem } from "node:os";
import { InferenceError } from "@infer/core";
import type { Llama, LlamaModel } from "node-llama-cpp";

const KV_ELEMENT_BYTES: Record<string, number> = { f32: 4, f16: 2, q8_0: 34 / 32 };

/**
 * The smallest KV cache llama.cpp could allocate for `cells` positions: keys and
 * values of every layer's KV heads, from the GGUF hyperparameters. A lower
 * bound (no compute buffers), so it never refuses a context that would fit.
 */
export function minimumKvCacheBytes(model: LlamaModel, cells: number, kvType = "f16"): number {
  let perToken = 0;
  for (const layer of attentionShape(model)) perToken += layer.kvHeads * (layer.keyLength + layer.valueLength);
  const bytes = perToken * cells * (KV_ELEMENT_BYTES[kvType] ?? 2);
  return Number.isFinite(bytes) && bytes > 0 ? bytes : 0;
}

interface LayerAttention {
  kvHeads: number;
  keyLength: number;
  valueLength: number;
}

/** Per layer: KV heads and key/value head sizes, from the GGUF hyperparameters. */
function attentionShape(model: LlamaModel): LayerAttention[] {
  const metadata = model.fileInfo.metadata as unknown as Record<string, Record<string, unknown> | undefined>;
  const arch = String(metadata.general?.architecture ?? "");
  const fields = (metadata[arch] ?? {}) as Record<string, unknown>;
  const layers = Number(fields.block_count ?? 0);
  const attention = (fields.attention ?? {}) as Record<string, unknown>;
  const heads = perLayer(attention.head_count, layers);
  const kvHeads = perLayer(attention.head_count_kv ?? attention.head_count, layers);
  const embedding = Number(fields.embedding_length ?? 0);
  return Array.from({ length: layers }, (_, layer) => {
    const headDim = heads[layer] ? embedding / heads[layer]! : 0;
    return {
      kvHeads: kvHeads[layer] ?? 0,
      keyLength: Number(attention.key_length ?? headDim),
      valueLength: Number(attention.value_length ?? headDim),
    };
  });
}

/** A quantized KV cache stores each head in whole blocks (32 values for q8_0). */
export function assertKvTypeFits(model: LlamaModel, kvType: string | undefined): void {
  if (kvType?.toLowerCase() !== "q8_0") return;
  const odd = attentionShape(model).find((l) => l.keyLength % 32 !== 0 || l.valueLength % 32 !== 0);
  if (odd) {
    throw new InferenceError(
      "INVALID_OPTION",
      `load option kvType 'q8_0' needs attention head sizes divisible by 32; this model's are ` +
        `${odd.keyLength} (keys) and ${odd.valueLength} (values); use kvType 'f16' or 'f32'`,
      { details: { option: "kvType" } },
    );
  }
}

function perLayer(value: unknown, layers: number): number[] {
  if (Array.isArray(value)) return value.map(Number);
  return Array.from({ length: layers }, () => Number(value ?? 0));
}

/**
 * Refuses, before llama.cpp allocates anything, a context whose KV cache alone
 * exceeds all the memory of this machine (RAM plus GPU memory).
 */
export async function assertContextFits(
  llama: Llama,
  model: LlamaModel,
  contextLength: number | undefined,
  slots: number,
  kvType: string | undefined,
): Promise<void> {
  if (contextLength === undefined) return;
  const needed = minimumKvCacheBytes(model, contextLength * slots, kvType?.toLowerCase());
  const vram = llama.gpu ? (await llama.getVramState()).total : 0;
  const available = totalmem() + vram;
  if (needed > available) {
    const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
    throw new InferenceError(
      "CONTEXT_OVERFLOW",
      `a context of contextLength ${contextLength} x parallelSlots ${slots} needs at least ${gib(needed)} GiB of KV cache; ` +
        `this machine has ${gib(available)} GiB of memory in all; lower contextLength or parallelSlots`,
      { details: { contextLength, parallelSlots: slots, neededBytes: needed, availableBytes: available } },
    );
  }
}
