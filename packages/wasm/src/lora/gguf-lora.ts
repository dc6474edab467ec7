/**
 * llama.cpp's GGUF LoRA files: general.type "adapter", adapter.type "lora",
 * adapter.lora.alpha, and per projection blk.N.<part>.weight.lora_a (ggml
 * [in, r], so row-major [r, in] like PEFT's A) and .lora_b (ggml [r, out]).
 * llama.cpp scales each pair by alpha / r, or by 1 when alpha is absent.
 */
import { InferenceError } from "@infer/core";
import { dequantize, getNumber, getString, GgmlType, GgufValueType, type GgufFile, type GgufWriteSpec } from "@infer/formats";
import { assemblePairs, formatError, modulesOf, pairScale, type LoraAdapter, type PairTensor } from "./adapter.js";
import { ggufLoraTensorName, parseGgufLoraTensorName } from "./modules.js";

/** An adapter from a parsed GGUF file. */
export function adapterFromGguf(gguf: GgufFile, file: string): LoraAdapter {
  const type = getString(gguf.metadata, "general.type");
  if (type !== "adapter") {
    throw formatError(file, "general.type", `${JSON.stringify(type ?? null)} is not "adapter": this GGUF file is not a LoRA adapter`);
  }
  const adapterType = getString(gguf.metadata, "adapter.type");
  if (adapterType !== "lora") {
    throw new InferenceError("UNSUPPORTED", `${file}: adapter.type: ${JSON.stringify(adapterType ?? null)} is not "lora"`, {
      details: { file, field: "adapter.type" },
    });
  }
  const tensors: PairTensor[] = gguf.tensors.map((info) => {
    const name = parseGgufLoraTensorName(info.name, file);
    // ggml lists the innermost dimension first.
    const shape = [...info.shape].reverse();
    return { ...name, name: info.name, shape, values: dequantize(info.type, gguf.tensorData(info), shape.reduce((a, b) => a * b, 1)) };
  });
  const pairs = assemblePairs(tensors, file);
  const ranks = new Set(pairs.map((p) => p.rank));
  const alpha = getNumber(gguf.metadata, "adapter.lora.alpha");
  if (alpha !== undefined && !(Number.isFinite(alpha) && alpha >= 0)) throw formatError(file, "adapter.lora.alpha", `${alpha} is not a finite number >= 0`);
  if (ranks.size > 1) {
    throw new InferenceError("UNSUPPORTED", `${file}: pairs of different ranks (${[...ranks].join(", ")}) are not supported`, {
      details: { file, field: "lora_a" },
    });
  }
  const rank = pairs[0]!.rank;
  return {
    rank,
    // Without alpha llama.cpp adds B (A x) unscaled: alpha = rank gives that scale.
    alpha: alpha ? alpha : rank,
    dropout: 0,
    targetModules: modulesOf(pairs),
    useRslora: false,
    layout: "gguf",
    architecture: getString(gguf.metadata, "general.architecture"),
    pairs,
    source: file,
  };
}

/**
 * The GGUF LoRA file of an adapter already in GGUF's q/k row order (rotary.ts
 * `inLayout`), for a base of `architecture`; F32 tensors.
 */
export function ggufLoraSpec(adapter: LoraAdapter, architecture: string): GgufWriteSpec {
  if (adapter.layout !== "gguf") {
    throw new InferenceError("INTERNAL", `${adapter.source}: the adapter must be in GGUF's q/k row order before it is written as GGUF`);
  }
  // llama.cpp scales by alpha / r: this alpha keeps PEFT's scale, rsLoRA's included.
  const alpha = pairScale(adapter, { rank: adapter.rank }) * adapter.rank;
  return {
    metadata: {
      "general.architecture": architecture,
      "general.type": "adapter",
      "adapter.type": "lora",
      "adapter.lora.alpha": { type: GgufValueType.FLOAT32, value: alpha },
    },
    tensors: adapter.pairs.flatMap((pair) => [
      { name: ggufLoraTensorName(pair.layer, pair.module, "A"), shape: [pair.inFeatures, pair.rank], type: GgmlType.F32, data: pair.a },
      { name: ggufLoraTensorName(pair.layer, pair.module, "B"), shape: [pair.rank, pair.outFeatures], type: GgmlType.F32, data: pair.b },
    ]),
  };
}
