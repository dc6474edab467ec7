/**
 * A WasmModel that trains LoRA adapters (the contract's TrainableModel): the
 * adapter applied last is what generation uses.
 */
import type { Adapter, LoRAConfig, TrainableModel, TrainBatch, TrainStepOptions, TrainStepResult } from "@infer/core";
import { LoraTrainer, type TrainedAdapter } from "../train/lora-trainer.js";
import { WasmModel, type WasmModelParts } from "./wasm-model.js";

export class WasmTrainableModel extends WasmModel implements TrainableModel {
  private readonly trainer: LoraTrainer;

  constructor(parts: WasmModelParts) {
    super(parts);
    this.trainer = new LoraTrainer(parts.transformer, parts.info.format === "gguf" ? "gguf" : "safetensors");
  }

  get numLayers(): number {
    return this.parts.transformer.config.numLayers;
  }

  applyLoRA(config?: Partial<LoRAConfig>): Adapter {
    this.assertOpen();
    this.forgetPrefixes();
    return publicAdapter(this.trainer.apply(config));
  }

  trainStep(batch: TrainBatch, options?: TrainStepOptions): Promise<TrainStepResult> {
    return this.exclusive(async () => {
      this.forgetPrefixes();
      return this.trainer.step(batch, options);
    }, options?.signal);
  }

  /** The mean next-token loss of a batch under the current adapter (or the base alone), without training. */
  evaluateLoss(batch: TrainBatch, options?: { signal?: AbortSignal }): Promise<TrainStepResult> {
    return this.exclusive(async () => this.trainer.loss(batch), options?.signal);
  }
}

function publicAdapter(adapter: TrainedAdapter): Adapter {
  return {
    config: adapter.config,
    totalParams: adapter.totalParams,
    save: (dir: string) => adapter.save(dir),
  };
}
