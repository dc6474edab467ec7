import type { CapabilityReport } from "@infer/core";

/**
 * What remote can do, stated once: the backend reports this table and each of
 * its models declares it (see core's `capabilitiesOf` for the rule). Options
 * reach the server's own fields; a server without one refuses the option with
 * UNSUPPORTED before anything is sent (docs/remote.md lists which server takes
 * which). The model-kind capabilities are what the server answered when probed
 * at load: a model has `embed` only when its server answered /v1/embeddings.
 */
export const REMOTE_CAPABILITIES: Readonly<CapabilityReport> = Object.freeze({
  generate: "supported",
  chat: "supported",
  classify: "supported",
  // Concurrent requests, which the server batches.
  "batch.generate": "supported",
  // The server's tokenizer is reached asynchronously (`tokenize` / `detokenize`), not as the synchronous TokenizerModel.
  tokenizer: "unsupported",
  // The server renders chats with its own template.
  "chat.template": "unsupported",
  embeddings: "supported",
  // GBNF and JSON schema through the server's structured-output fields.
  grammar: "supported",
  speculative: "unsupported",
  "lora.inference": "unsupported",
  "lora.training": "unsupported",
  // Generated tokens' log-probabilities, and classify's full distribution where the server returns it (llama-server).
  "probe.logits": "supported",
  "probe.attention": "unsupported",
  "kv.snapshot": "unsupported",
});
