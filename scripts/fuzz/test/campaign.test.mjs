// CI's fuzz campaign: a fixed seed, a fixed number of mutants of every target, on the wasm backend and on
// llama_cpp (its known findings skipped: each would cost a child restart). Any crash, hang, INTERNAL or
// over-memory case not in known-findings.mjs fails the test; `npm run fuzz -- --seed 1 --cases N --save`
// reproduces it and saves the reproducer.
import assert from "node:assert/strict";
import { test } from "node:test";
import { runCampaign } from "../campaign.mjs";

/** Cases per target: enough to cover every mutator a few times, small enough for a busy CI machine. */
const CASES = { wasm: 200, llama_cpp: 300 };

function describe(findings) {
  return findings.map((f) => `${f.outcome} ${f.target}/${f.backend} #${f.index} [${f.tags.join(", ")}]: ${f.message ?? f.code}`).join("\n");
}

for (const backend of ["wasm", "llama_cpp"]) {
  test(`fuzz campaign on ${backend}: no new crash, hang, INTERNAL or over-memory case`, { timeout: 300_000 }, async (t) => {
    let campaign;
    try {
      campaign = await runCampaign({ seed: 1, backends: [backend], cases: CASES[backend], skipKnown: backend === "llama_cpp" });
    } catch (error) {
      if (!error.unavailable) throw error;
      t.skip(error.message);
      return;
    }
    const { stats, findings } = campaign;
    const fresh = findings.filter((f) => !f.known);
    assert.equal(fresh.length, 0, `new fuzz findings (seed 1):\n${describe(fresh)}`);
    // The campaign ran: every target reached both ends (refused and accepted inputs).
    for (const s of stats) {
      assert.equal(s.cases + s.skipped, CASES[backend], `${s.target}/${s.backend}`);
      assert.ok(s.typed > 0, `${s.target}/${s.backend}: no mutant was refused`);
    }
  });
}
