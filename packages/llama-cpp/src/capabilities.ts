import type { CapabilityReport } from "@infer/core";

/**
 * What llama_cpp can do, stated once: the backend reports this table and each
 * of its models declares it (see core's `capabilitiesOf` for the rule).
 */
export const LLAMA_CPP_CAPABILITIES: Readonly<CapabilityReport> = Object.freeze({
  generate: "supported",
  chat: "supported",
  classify: "supported",
  "batch.generate": "supported",
  tokenizer: "supported",
  "chat.template": "supported",
  embeddings: "supported",
  grammar: "supported",
  // With a draftModel at load.
  speculative: "supported",
  // With a GGUF adapterPath at load.
  "lora.inference": "supported",
  "lora.training": "unsupported",
  // Raw logits per step: classify's `logits`, generate's `logprobs` and the `logits` probe.
  "probe.logits": "supported",
  "probe.attention": "unsupported",
  // snapshotKV / restoreKV through node-llama-cpp's sequence state files (not through an isolated model).
  "kv.snapshot": "supported",
});
