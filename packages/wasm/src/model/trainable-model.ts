/**
 * A WasmModel that trains LoRA adapters (the contract's TrainableModel): the
 * adapter applied last is what generation uses.
 */
import type { Adapter, LoRAConfig, TrainableModel, TrainBatch, TrainingState, TrainStepOptions, TrainStepResult } from "@infer/core";
import { jsonlExamples, type ExampleOptions, type TrainingExample } from "../dataset/index.js";
import { LoraTrainer, type TrainedAdapter } from "../train/lora-trainer.js";
import { WasmModel, type WasmModelParts } from "./wasm-model.js";

export class WasmTrainableModel extends WasmModel implements TrainableModel {
  private readonly trainer: LoraTrainer;

  constructor(parts: WasmModelParts) {
    super(parts);
    this.trainer = new LoraTrainer(parts.transformer, parts.info.format === "gguf" ? "gguf" : "safetensors", parts.source);
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

  trainingState(): TrainingState {
    this.assertOpen();
    return this.trainer.state();
  }

  restoreTrainingState(state: TrainingState): void {
    this.assertOpen();
    this.trainer.restore(state);
  }

  /** A JSONL dataset's examples, tokenized by this model's tokenizer (its chat template for {"messages"}); `file` names it in errors. */
  jsonlExamples(text: string, file: string, options?: ExampleOptions): TrainingExample[] {
    return jsonlExamples(text, file, this.parts.tokenizer, options);
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
    peftFiles: async () => adapter.peftFiles(),
  };
}
