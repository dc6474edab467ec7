// LoRA adapters: PEFT folders and llama.cpp GGUF files read and written, fitted to a loaded model.
export { pairScale, type LoraAdapter, type LoraLayout, type LoraPair } from "./adapter.js";
export { fitAdapter, loraDeltas, type AdapterBase } from "./apply.js";
export { mergePairInto } from "./merge.js";
export { adapterFromGguf, ggufLoraSpec } from "./gguf-lora.js";
export {
  baseWeightName,
  ggufLoraTensorName,
  hfModulePath,
  isLoraModule,
  LORA_MODULES,
  peftTensorName,
  type LoraModule,
} from "./modules.js";
export { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE, parsePeftConfig, peftAdapterFromBytes, peftConfigJson, peftFolderFiles, peftTensors, type PeftConfig } from "./peft.js";
export { readPeftFolder, writeAtomically, writePeftFolder, type WritePeftOptions } from "./peft-folder.js";
export { baseModelWarning, readLoraAdapter } from "./read.js";
export { inLayout, permuteRotaryRows, permutesQK, unpermuteRotaryRows } from "./rotary.js";
