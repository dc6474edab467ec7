// Replays saved reproducers in a fuzzing child with the campaign's limits, so a crash, hang or runaway
// allocation stays in the child.
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULTS } from "./campaign.mjs";
import { FuzzWorker } from "./pool.mjs";
import { listReproducers, writeCaseDir } from "./reproducers.mjs";
import { loadSeeds, PEFT_FILES } from "./seeds.mjs";
import { targetNamed } from "./targets.mjs";

/** The mutated files a reproducer folder holds: everything but case.json. */
function caseFiles(dir) {
  const files = {};
  for (const name of readdirSync(dir)) if (name !== "case.json") files[name] = readFileSync(join(dir, name));
  return files;
}

/** A replayer: `replay(reproducer)` resolves with the outcome; `close()` stops its children. */
export async function createReplayer(options = {}) {
  const workDir = join(tmpdir(), `infer-fuzz-replay-${process.pid}`);
  await mkdir(workDir, { recursive: true });
  const seeds = await loadSeeds(join(workDir, "seeds"), { real: true });
  const workers = new Map();
  const workerFor = (backend) => {
    if (!workers.has(backend)) {
      workers.set(backend, new FuzzWorker({ backend, modelPath: seeds.tinyModel, timeLimitMs: options.timeLimitMs ?? DEFAULTS.timeLimitMs, memoryLimitMiB: options.memoryLimitMiB ?? DEFAULTS.memoryLimitMiB }));
    }
    return workers.get(backend);
  };
  return {
    async replay({ dir, meta }) {
      const target = targetNamed(meta.target);
      const caseDir = join(workDir, "case");
      const files = caseFiles(dir);
      if (target.kind === "adapter") {
        const peft = target.entry === ".";
        const seed = (peft ? seeds.peft : seeds.ggufLora).find((s) => s.name === meta.seedModel);
        await writeCaseDir(caseDir, files, peft ? seed.folder : undefined, PEFT_FILES);
        return workerFor(meta.backend).run({ dir: caseDir, base: seed.base, target: { kind: target.kind, entry: target.entry } });
      }
      const seed = seeds.hf.find((s) => s.name === meta.seedModel);
      await writeCaseDir(caseDir, files, target.entry === "." ? seed?.folder : undefined);
      return workerFor(meta.backend).run({ dir: caseDir, target: { kind: target.kind, entry: target.entry } });
    },
    async close() {
      for (const worker of workers.values()) worker.stop();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}

export { listReproducers };
export { seedAvailable } from "./seeds.mjs";
