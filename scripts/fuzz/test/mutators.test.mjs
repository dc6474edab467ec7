// The fuzzer's own parts: mutants are reproducible from their numbers, the GGUF layout scanner reads the
// seeds whole, and the known-findings predicates match their reproducers but no valid seed.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { makeCase } from "../campaign.mjs";
import { KNOWN_FINDINGS, knownFinding } from "../known-findings.mjs";
import { scanGguf } from "../mutate-gguf.mjs";
import { listReproducers } from "../reproducers.mjs";
import { loadSeeds } from "../seeds.mjs";
import { TARGETS } from "../targets.mjs";

const dir = join(tmpdir(), `infer-fuzz-test-${process.pid}`);
let seeds;
before(async () => {
  seeds = await loadSeeds(dir);
});
after(() => rm(dir, { recursive: true, force: true }));

test("a case is the same mutant every time it is made from the same numbers, and differs across indices", () => {
  for (const target of TARGETS) {
    const a = makeCase(target, seeds, 5, 17);
    const b = makeCase(target, seeds, 5, 17);
    assert.deepEqual(a.tags, b.tags, target.name);
    assert.deepEqual(a.files, b.files, target.name);
    const others = [18, 19, 20, 21].map((i) => makeCase(target, seeds, 5, i));
    assert.ok(others.some((c) => !Object.keys(c.files).every((name) => c.files[name].equals(a.files[name] ?? Buffer.alloc(0)))), target.name);
  }
});

test("the GGUF layout scanner reads every seed to its end, with every tensor", () => {
  for (const seed of seeds.gguf) {
    const layout = scanGguf(seed.bytes);
    assert.ok(layout.complete, seed.name);
    const count = layout.fields.find((f) => f.kind === "tensor_count").value;
    assert.equal(BigInt(layout.tensors.length), count, seed.name);
    assert.ok(layout.tensors.includes("token_embd.weight"), seed.name);
  }
});

test("no valid seed matches a known finding", () => {
  for (const backend of ["wasm", "llama_cpp"]) {
    for (const seed of seeds.gguf) assert.equal(knownFinding({ files: { "model.gguf": seed.bytes }, tags: [] }, backend), undefined, seed.name);
    for (const seed of seeds.hf) assert.equal(knownFinding({ files: seed.files, tags: [] }, backend), undefined, seed.name);
  }
});

test("every known finding has a saved reproducer it matches", () => {
  const matched = new Set();
  for (const { dir: folder, meta } of listReproducers()) {
    const files = {};
    for (const name of readdirSync(folder)) if (name !== "case.json") files[name] = readFileSync(join(folder, name));
    const known = knownFinding({ files, tags: meta.mutation }, meta.backend);
    if (meta.expect) assert.ok(known, `${folder} is marked ${meta.expect} but matches no known finding`);
    if (known) matched.add(known.id);
  }
  assert.deepEqual([...matched].sort(), KNOWN_FINDINGS.map((k) => k.id).sort());
});
