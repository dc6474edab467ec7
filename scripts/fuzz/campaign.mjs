// A fuzzing campaign: mutants of every target, run on every backend by a pool of children, counted by
// outcome. Deterministic: case i of a target is the same mutant on every run with the same seed.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mkdir, rm } from "node:fs/promises";
import { CaseDirs } from "./case-dirs.mjs";
import { knownFinding } from "./known-findings.mjs";
import { FuzzWorker } from "./pool.mjs";
import { caseSeed, rng } from "./random.mjs";
import { findingKey, normalizeMessage } from "./reproducers.mjs";
import { loadSeeds } from "./seeds.mjs";
import { TARGETS } from "./targets.mjs";

export const OUTCOMES = ["typed", "generated", "internal", "crash", "hang", "memory"];
export const BAD = new Set(["internal", "crash", "hang", "memory"]);

export const DEFAULTS = { seed: 1, jobs: 1, timeLimitMs: 5000, memoryLimitMiB: 1024, backends: ["wasm", "llama_cpp"] };

/** Case `index` of `target`: the mutant, made from the seeds. */
export function makeCase(target, seeds, campaignSeed, index) {
  const r = rng(caseSeed(campaignSeed, target.name, index));
  return target.make(r, seeds, index);
}

/**
 * options: seed, targets (names), backends, cases (per target and backend), first (the index of the first
 * case: a long campaign runs as chunks that add up to one), seconds (wall clock in all),
 * jobs (children per backend), timeLimitMs, memoryLimitMiB, skipKnown, real (shared models as seeds too),
 * only ({target, index}: that one case), onResult(result) for progress. Returns { stats, findings, seconds }.
 */
export async function runCampaign(options) {
  const o = { ...DEFAULTS, ...options };
  const workDir = join(tmpdir(), `infer-fuzz-${process.pid}`);
  await mkdir(workDir, { recursive: true });
  const seeds = await loadSeeds(join(workDir, "seeds"), { real: o.real });
  const targets = TARGETS.filter((t) => !o.targets || o.targets.includes(t.name));
  const deadline = o.seconds ? Date.now() + o.seconds * 1000 : Infinity;
  const stats = new Map();
  const findings = new Map();
  const started = Date.now();

  const statsOf = (target, backend) => {
    const key = `${target}/${backend}`;
    if (!stats.has(key)) stats.set(key, { target, backend, cases: 0, skipped: 0, known: 0, ms: 0, messages: new Set(), ...Object.fromEntries(OUTCOMES.map((k) => [k, 0])) });
    return stats.get(key);
  };

  /**
   * The next case this slot runs, its files already written or attached: { target, index, fuzzCase, known,
   * dir or files }, or undefined when the queue is empty. Known findings are counted as skipped here under
   * skipKnown.
   */
  function prepare(backend, queue, dirs) {
    for (;;) {
      const next = queue.next();
      if (!next) return undefined;
      const { target, index } = next;
      const fuzzCase = makeCase(target, seeds, o.seed, index);
      const known = knownFinding(fuzzCase, backend);
      if (known && o.skipKnown) {
        statsOf(target.name, backend).skipped++;
        continue;
      }
      // A model or adapter is loaded from a path, so its files go to disk; a template or a request travels with the case.
      const onDisk = target.kind === "model" || target.kind === "adapter";
      const dir = onDisk ? dirs.write(fuzzCase.files, fuzzCase.links, fuzzCase.linkNames) : undefined;
      return { target, index, fuzzCase, known, dir, files: onDisk ? undefined : fuzzCase.files };
    }
  }

  function record(backend, { target, index, fuzzCase, known }, result) {
    const s = statsOf(target.name, backend);
    s.cases++;
    s.ms += result.ms;
    s[result.outcome]++;
    // Distinct refusals show how deep the mutants reach: one message for all would mean one check stops them.
    if (result.outcome === "typed") s.messages.add(`${result.code} ${normalizeMessage(result.message)}`);
    if (BAD.has(result.outcome)) {
      const matched = known?.outcomes.includes(result.outcome) ? known : undefined;
      const finding = { target: target.name, backend, index, campaignSeed: o.seed, ...fuzzCase, ...result, known: matched };
      if (matched) s.known++;
      const key = findingKey(finding);
      const seen = findings.get(key);
      if (seen) seen.count++;
      else findings.set(key, { ...finding, count: 1 });
    }
    o.onResult?.({ target: target.name, backend, index, ...result, known: known?.outcomes.includes(result.outcome) ? known.id : undefined });
  }

  async function drive(backend, worker, queue, slot) {
    const dirs = new CaseDirs(join(workDir, `${backend}-${slot}`));
    const run = (c) => worker.run({ dir: c.dir, files: c.files, base: c.fuzzCase.base, target: { kind: c.target.kind, entry: c.target.entry } });
    let current = Date.now() > deadline ? undefined : prepare(backend, queue, dirs);
    let running = current && run(current);
    while (current) {
      // The parent makes and writes the next mutant while the child runs this one, and hands it over
      // before its bookkeeping: the child waits for nothing but the message.
      const next = Date.now() > deadline ? undefined : prepare(backend, queue, dirs);
      const result = await running;
      running = next && Date.now() <= deadline ? run(next) : undefined;
      record(backend, current, result);
      current = running && next;
    }
  }

  const runs = [];
  const workers = [];
  for (const backend of o.backends) {
    const eligible = targets.filter((t) => t.backends.includes(backend));
    const queue = o.only ? single(eligible.find((t) => t.name === o.only.target), o.only.index) : roundRobin(eligible, o.cases, o.first);
    for (let slot = 0; slot < o.jobs; slot++) {
      const worker = new FuzzWorker({ backend, modelPath: seeds.tinyModel, timeLimitMs: o.timeLimitMs, memoryLimitMiB: o.memoryLimitMiB });
      workers.push(worker);
      runs.push(drive(backend, worker, queue, slot));
    }
  }
  try {
    await Promise.all(runs);
  } finally {
    for (const worker of workers) worker.stop();
    await rm(workDir, { recursive: true, force: true });
  }
  const restarts = workers.reduce((n, w) => n + w.restarts, 0);
  return { stats: [...stats.values()], findings: [...findings.values()], seconds: (Date.now() - started) / 1000, restarts };
}

/**
 * Hands out (target, index) pairs, targets in turn, indexes from `first`, each up to `limit` cases (no limit:
 * until time runs out).
 */
function roundRobin(targets, limit = Infinity, first = 0) {
  const counts = new Map(targets.map((t) => [t.name, first]));
  let turn = 0;
  return {
    next() {
      for (let tried = 0; tried < targets.length; tried++) {
        const target = targets[turn++ % targets.length];
        const index = counts.get(target.name);
        if (index - first < limit) {
          counts.set(target.name, index + 1);
          return { target, index };
        }
      }
      return undefined;
    },
  };
}

/** One case (replaying a campaign's finding by its numbers). */
function single(target, index) {
  let given = target === undefined;
  return {
    next() {
      if (given) return undefined;
      given = true;
      return { target, index };
    },
  };
}
