// The parts of a loaded model, in a module of their own: the model class and the helpers it
// delegates to (batch, classify, start-decode) all take them, and none of those needs the class.
import type { ProbeBus, ModelInfo } from "@infer/core";
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { TextGuard } from "./byte-fallback.js";
import type { StateLayout } from "./kv-state-shape.js";

/** Everything a loaded model holds; built by `loadLlamaCppModel`. */
export interface LlamaCppParts {
  path: string;
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  /** One sequence per parallel slot; a call takes the one whose tokens share the longest prefix with its prompt. */
  slots: LlamaContextSequence[];
  /** Whether a prompt reuses the tokens a sequence already evaluated (LoadOptions.promptCacheBytes not 0). */
  reusePrefixes: boolean;
  /** LoadOptions.kvType as loaded (node-llama-cpp's default, f16, when not given): part of a KV snapshot's identity. */
  kvType: string;
  /** The speculative-decoding draft, when `draftModel` was given. */
  draft?: { model: LlamaModel; context: LlamaContext };
  threads: number;
  info: ModelInfo;
  probe: ProbeBus;
  /** Refuses text llama.cpp's tokenizer would end the process on (a vocabulary missing byte tokens); usually absent. */
  textGuard?: TextGuard;
  /** What a KV snapshot's state is walked against before llama.cpp reads it. */
  stateLayout: StateLayout;
}
