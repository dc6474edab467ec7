/**
 * An adapter fitted to a loaded model: each pair matched to the matrix it
 * adapts, shapes checked against it, q/k rows in the base's order, the scale
 * folded into B. The result is what Transformer.lora takes.
 */
import { InferenceError } from "@infer/core";
import { GgmlType } from "@infer/formats";
import type { ModelConfig } from "../engine/config.js";
import type { LoraDelta } from "../engine/lora.js";
import type { WeightMatrix } from "../kernels/types.js";
import { pairScale, type LoraAdapter } from "./adapter.js";
import { baseWeightName } from "./modules.js";
import { inLayout } from "./rotary.js";

/** What an adapter is fitted to: a loaded model's configuration, file format and matrices by GGUF-style name. */
export interface AdapterBase {
  config: ModelConfig;
  format: "gguf" | "safetensors";
  matrices: ReadonlyMap<string, WeightMatrix>;
}

/** MODEL_FORMAT naming the adapter file and field, and the base the adapter says it was made for. */
function mismatch(adapter: LoraAdapter, field: string, problem: string): InferenceError {
  const madeFor = adapter.baseModel ?? adapter.architecture;
  return new InferenceError(
    "MODEL_FORMAT",
    `${adapter.source}: ${field}: ${problem}${madeFor ? ` (the adapter was made for ${madeFor})` : ""}`,
    { details: { file: adapter.source, field, baseModel: adapter.baseModel } },
  );
}

/** The adapter's pairs in the base's q/k order, each checked against the matrix it adapts. */
export function fitAdapter(adapter: LoraAdapter, base: AdapterBase): LoraAdapter {
  const { config } = base;
  if (adapter.architecture !== undefined && adapter.architecture !== config.architecture) {
    throw mismatch(adapter, "general.architecture", `"${adapter.architecture}" is not the model's "${config.architecture}"`);
  }
  const fitted = inLayout(adapter, base.format === "gguf" ? "gguf" : "hf", config.architecture, config);
  for (const pair of fitted.pairs) {
    const name = baseWeightName(pair.layer, pair.module);
    if (pair.layer >= config.numLayers) {
      throw mismatch(adapter, `${pair.module} of layer ${pair.layer}`, `the model has ${config.numLayers} layers`);
    }
    const w = base.matrices.get(name);
    if (!w) {
      throw new InferenceError("UNSUPPORTED", `${adapter.source}: target module ${pair.module}: ${config.architecture} models have no separate ${name}`, {
        details: { file: adapter.source, field: "target_modules", module: pair.module },
      });
    }
    if (w.rows !== pair.outFeatures || w.cols !== pair.inFeatures) {
      throw mismatch(
        adapter,
        `${pair.module} of layer ${pair.layer}`,
        `B A is [${pair.outFeatures}, ${pair.inFeatures}] but the model's ${name} is [${w.rows}, ${w.cols}]`,
      );
    }
  }
  return fitted;
}

/** Transformer.lora for the adapter on this base: A and scaled B as F32 matrices, by the base matrix. */
export function loraDeltas(adapter: LoraAdapter, base: AdapterBase): Map<WeightMatrix, LoraDelta> {
  const deltas = new Map<WeightMatrix, LoraDelta>();
  for (const pair of fitAdapter(adapter, base).pairs) {
    const w = base.matrices.get(baseWeightName(pair.layer, pair.module))!;
    const scale = pairScale(adapter, pair);
    const b = pair.b.map((value) => value * scale);
    deltas.set(w, { a: f32Matrix(pair.a, pair.rank, pair.inFeatures), b: f32Matrix(b, pair.outFeatures, pair.rank) });
  }
  return deltas;
}

function f32Matrix(values: Float32Array, rows: number, cols: number): WeightMatrix {
  // A copy of its own: aligned, and not shared with the adapter the caller may still change.
  const data = new Uint8Array(new Float32Array(values).buffer);
  return { type: GgmlType.F32, rows, cols, data };
}
