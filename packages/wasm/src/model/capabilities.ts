import type { CapabilityReport } from "@infer/core";

/**
 * What wasm can do, stated once: the backend reports this table and each of
 * its models declares it (see core's `capabilitiesOf` for the rule).
 */
export const WASM_CAPABILITIES: Readonly<CapabilityReport> = Object.freeze({
  generate: "supported",
  chat: "supported",
  classify: "supported",
  "batch.generate": "supported",
  tokenizer: "supported",
  "chat.template": "supported",
  embeddings: "unsupported",
  grammar: "unsupported",
  speculative: "unsupported",
  // With adapterPath at load: a PEFT folder or a GGUF LoRA file.
  "lora.inference": "supported",
  // llama, qwen2, qwen3 and gemma3 models (their models implement TrainableModel; phi3 models do not).
  "lora.training": "supported",
  // Raw logits per step: classify's `logits`, generate's `logprobs` and the `logits` probe.
  "probe.logits": "supported",
  "probe.attention": "supported",
  // snapshotKV / restoreKV of the last conversation; prompts reuse cached prefixes (LoadOptions.promptCacheBytes).
  "kv.snapshot": "supported",
});
