// The LoRA adapter targets: their seeds are valid adapters for their base models, and a case saved as a
// reproducer replays as the campaign ran it (the base model and the adapter's other files laid out again).
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import "@infer/wasm";
import "@infer/llama-cpp";
import { makeCase, runCampaign } from "../campaign.mjs";
import { createReplayer } from "../replay.mjs";
import { listReproducers, saveReproducer } from "../reproducers.mjs";
import { loadSeeds } from "../seeds.mjs";
import { targetNamed } from "../targets.mjs";

let dir;
let seeds;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "infer-fuzz-adapters-"));
  seeds = await loadSeeds(join(dir, "seeds"));
});
after(() => rm(dir, { recursive: true, force: true }));

/** Loads with `backend`, or undefined where it cannot run here (no llama.cpp build for this machine). */
async function loadOrSkip(t, path, options) {
  try {
    return await loadModel(path, { threads: 1, ...options });
  } catch (error) {
    if (!isInferenceError(error, "BACKEND_UNAVAILABLE")) throw error;
    t.skip(error.message);
    return undefined;
  }
}

test("every seed adapter applies to its base: the adapted model generates, and some change its greedy tokens", async (t) => {
  const cases = [
    ...seeds.peft.map((s) => ({ name: `${s.name} PEFT`, base: s.base, adapterPath: s.folder, backend: "wasm" })),
    ...seeds.ggufLora.flatMap((s) => ["wasm", "llama_cpp"].map((backend) => ({ name: `${s.name} GGUF on ${backend}`, base: s.base, adapterPath: s.path, backend }))),
  ];
  let changed = 0;
  for (const { name, base, adapterPath, backend } of cases) {
    const plain = await loadOrSkip(t, base, { backend });
    if (!plain) return;
    const adapted = await loadModel(base, { backend, threads: 1, adapterPath });
    try {
      const greedy = { maxTokens: 4, temperature: 0, ignoreEos: true };
      const [a, b] = [await adapted.generateText("hi", greedy), await plain.generateText("hi", greedy)];
      assert.equal(a.tokens.length, 4, name);
      if (a.tokens.some((token, i) => token !== b.tokens[i])) changed++;
    } finally {
      await adapted.close();
      await plain.close();
    }
  }
  // Random pairs small enough to stay valid still move some tiny model's argmax: the adapter is applied, not ignored.
  assert.ok(changed > 0, "no seed adapter changed any greedy token");
});

test("an adapter case saved as a reproducer replays to the campaign's outcome, refused and generated alike", async (t) => {
  const root = join(dir, "regressions");
  const replayer = await createReplayer();
  try {
    for (const [name, backend] of [["peft-adapter", "wasm"], ["gguf-adapter", "wasm"], ["gguf-adapter", "llama_cpp"]]) {
      const ran = [];
      try {
        await runCampaign({ seed: 1, targets: [name], backends: [backend], cases: 120, onResult: (r) => ran.push(r) });
      } catch (error) {
        if (!error.unavailable) throw error;
        t.skip(error.message);
        continue;
      }
      const picked = ["typed", "generated"].map((outcome) => ran.find((r) => r.outcome === outcome));
      assert.ok(picked.every(Boolean), `${name}/${backend}: 120 cases of seed 1 should include a refused and a generated one`);
      for (const result of picked) {
        const fuzzCase = makeCase(targetNamed(name), seeds, 1, result.index);
        const saved = await saveReproducer({ ...fuzzCase, ...result, target: name, backend, campaignSeed: 1 }, root);
        const reproducer = listReproducers(root).find((r) => r.dir === saved);
        const replayed = await replayer.replay(reproducer);
        assert.equal(replayed.outcome, result.outcome, `${name}/${backend} #${result.index}`);
        assert.equal(replayed.code, result.code, `${name}/${backend} #${result.index}`);
      }
    }
  } finally {
    await replayer.close();
  }
});
