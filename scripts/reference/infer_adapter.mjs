#!/usr/bin/env node
// Makes the fixture of an adapter our trainer saved, for PEFT to load (scripts/reference/peft_adapter.py
// --check-ours records what PEFT makes of it; packages/wasm/test/lora/peft.test.ts checks both):
//
//   npm run build && node scripts/reference/infer_adapter.mjs [../shared/models/tinystories-656k]
//   python3 scripts/reference/peft_adapter.py --check-ours packages/wasm/test/fixtures/lora/infer-adapter
//
// A few steps of rank 4 on every linear at a high learning rate, so that every B is far from zero.
import { rm } from "node:fs/promises";
import { loadTrainable } from "@infer/core";
import "@infer/wasm";

const model = process.argv[2] ?? "../shared/models/tinystories-656k";
const out = "packages/wasm/test/fixtures/lora/infer-adapter";
const trainable = await loadTrainable(model, { backend: "wasm", threads: 1 });
const adapter = trainable.applyLoRA({
  rank: 4,
  alpha: 8,
  targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
  seed: 7,
});
const text = "Once upon a time, there was a little dog named Zorblat. Zorblat liked to run in the park.";
const inputIds = [trainable.encode(text)];
for (let step = 0; step < 4; step++) {
  const { loss } = await trainable.trainStep({ inputIds }, { learningRate: 1e-2 });
  console.log(`step ${step}: loss ${loss.toFixed(4)}`);
}
await rm(out, { recursive: true, force: true });
await adapter.save(out);
await trainable.close();
console.log(`wrote ${out}`);
