import assert from "node:assert/strict";
import { it } from "node:test";
import { CAPABILITY_IDS, capabilitiesOf, supportedCapabilities, type Backend } from "../src/index.js";
import { FakeBackend, FakeModel } from "./fake-backend.js";

it("a backend's report is its declaration, unsupported elsewhere", () => {
  const backend = new FakeBackend({ capabilities: { generate: "supported", grammar: "planned", embeddings: "experimental" } });
  const report = capabilitiesOf(backend);
  assert.deepEqual(Object.keys(report), [...CAPABILITY_IDS]);
  assert.equal(report.generate, "supported");
  assert.equal(report.grammar, "planned");
  assert.equal(report.embeddings, "experimental");
  assert.equal(report.chat, "unsupported");
  assert.deepEqual(supportedCapabilities(backend), ["generate"]);
  const bare: Backend = { name: "bare", available: () => true, canLoad: async () => false, loadModel: async () => new FakeModel() };
  assert.deepEqual(supportedCapabilities(bare), []);
});

it("a model's report follows the optional interfaces it implements", () => {
  const model = new FakeModel(); // a TokenizerModel, nothing else optional
  const report = capabilitiesOf(model);
  for (const id of ["generate", "chat", "classify", "batch.generate", "tokenizer", "chat.template"] as const) {
    assert.equal(report[id], "supported", id);
  }
  for (const id of ["embeddings", "lora.training", "probe.attention", "kv.snapshot", "grammar"] as const) {
    assert.equal(report[id], "unsupported", id);
  }
});

it("embedding, attention, KV snapshot and training methods are detected; declarations refine", () => {
  class RichModel extends FakeModel {
    readonly capabilities = { grammar: "experimental", "probe.attention": "experimental" } as const;
    async embed(texts: string[]) {
      return texts.map(() => new Float32Array(2));
    }
    async inspectAttention() {
      return { numLayers: 0, numKVHeads: 0, numQueryHeads: 0, seqLen: 0, headDim: 0, keys: [] };
    }
    async snapshotKV() {
      return new Uint8Array();
    }
    async restoreKV() {}
    applyLoRA() {
      return { totalParams: 0, save: async () => undefined };
    }
    async trainStep() {
      return { loss: 0 };
    }
  }
  const report = capabilitiesOf(new RichModel());
  assert.equal(report.embeddings, "supported");
  assert.equal(report["kv.snapshot"], "supported");
  assert.equal(report["lora.training"], "supported");
  assert.equal(report["probe.attention"], "experimental"); // declared over derived
  assert.equal(report.grammar, "experimental");
  assert.ok(supportedCapabilities(new RichModel()).includes("embeddings"));
});
