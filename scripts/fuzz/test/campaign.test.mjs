// CI's fuzz campaign: a fixed seed, a fixed number of mutants of every target, on the wasm backend and on
// llama_cpp, known findings skipped (each costs a child restart or a time limit; the reproducers' replay
// covers them). Any crash, hang, INTERNAL or over-memory case fails the test; `npm run fuzz -- --seed 1 --cases N --save`
// reproduces it and saves the reproducer.
import assert from "node:assert/strict";
import { test } from "node:test";
import { runCampaign } from "../campaign.mjs";

/** Cases per target: enough to cover every mutator a few times, small enough for a busy CI machine. */
const CASES = { wasm: 200, llama_cpp: 300 };
/**
 * The slowest refused cases of this campaign (a template looping 10^5 times, a model asking llama.cpp for
 * a large context) take over a second on an idle machine; a busy one must not turn them into hangs.
 */
const TIME_LIMIT_MS = 15_000;

function describe(findings) {
  return findings.map((f) => `${f.outcome} ${f.target}/${f.backend} #${f.index} [${f.tags.join(", ")}]: ${f.message ?? f.code}`).join("\n");
}

for (const backend of ["wasm", "llama_cpp"]) {
  test(`fuzz campaign on ${backend}: no new crash, hang, INTERNAL or over-memory case`, { timeout: 300_000 }, async (t) => {
    let campaign;
    try {
      campaign = await runCampaign({ seed: 1, backends: [backend], cases: CASES[backend], skipKnown: true, timeLimitMs: TIME_LIMIT_MS });
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
