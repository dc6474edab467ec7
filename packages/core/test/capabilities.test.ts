import assert from "node:assert/strict";
import { it } from "node:test";
import {
  CAPABILITY_IDS,
  capabilitiesOf,
  capabilityMismatches,
  supportedCapabilities,
  type Backend,
  type CapabilityId,
  type CapabilityStatus,
} from "../src/index.js";
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

it("a declaration cannot claim a model-kind capability whose interface the model lacks", () => {
  class Claiming extends FakeModel {
    readonly capabilities = { embeddings: "supported", "kv.snapshot": "planned", grammar: "supported" } as const;
  }
  const report = capabilitiesOf(new Claiming());
  assert.equal(report.embeddings, "unsupported"); // no embed(): the claim is dropped
  assert.equal(report["kv.snapshot"], "planned"); // not a claim that it works
  assert.equal(report.grammar, "supported"); // no interface shows grammar: the declaration is the answer
});

it("capabilityMismatches: a model agrees with its backend's table, or lacks a model-kind capability", () => {
  const table = {
    generate: "supported",
    chat: "supported",
    classify: "supported",
    "batch.generate": "supported",
    tokenizer: "supported",
    "chat.template": "supported",
    embeddings: "supported",
    grammar: "supported",
  } as const;
  class Declaring extends FakeModel {
    capabilities: Partial<Record<CapabilityId, CapabilityStatus>> = table;
  }
  const backend = new FakeBackend({ capabilities: table });
  const model = new Declaring(); // a tokenizer model without embed(): embeddings differ, by the rule
  assert.equal(capabilitiesOf(model).embeddings, "unsupported");
  assert.deepEqual(capabilityMismatches(backend, model), []);
  model.capabilities = { ...table, grammar: "experimental" };
  assert.deepEqual(capabilityMismatches(backend, model), ['grammar: backend fake reports "supported", its fake model "experimental"']);
  // A model-kind capability may be missing from a model; any other may not differ.
  model.capabilities = { ...table, tokenizer: "unsupported", speculative: "supported" };
  assert.deepEqual(capabilityMismatches(backend, model), ['speculative: backend fake reports "unsupported", its fake model "supported"']);
});
