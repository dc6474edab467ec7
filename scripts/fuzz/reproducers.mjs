// Reproducers: each crash, hang, INTERNAL or over-memory case saved as its mutated file(s) plus case.json,
// one folder per distinct finding. The regression test replays them all.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { HF_FILES } from "./seeds.mjs";

export const REGRESSIONS = new URL("./regressions/", import.meta.url).pathname;

/** A message with its numbers, paths and quoted names blanked: one finding, however it was reached. */
export function normalizeMessage(message = "") {
  return message
    .replace(/\/[^\s'"`:,)]+/g, "<path>")
    .replace(/'[^']*'/g, "'…'")
    .replace(/0x[0-9a-f]+/gi, "N")
    .replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/gi, "N")
    .slice(0, 160);
}

export const findingKey = (f) => `${f.target}|${f.backend}|${f.outcome}|${normalizeMessage(f.message ?? f.code)}`;

/** Keys of the reproducers already saved, so a campaign saves only new findings. */
export function savedKeys(root = REGRESSIONS) {
  return new Set(listReproducers(root).map((r) => r.meta.key));
}

export function listReproducers(root = REGRESSIONS) {
  if (!existsSync(root)) return [];
  const out = [];
  for (const target of readdirSync(root).sort()) {
    for (const id of readdirSync(join(root, target)).sort()) {
      const dir = join(root, target, id);
      if (existsSync(join(dir, "case.json"))) out.push({ dir, meta: JSON.parse(readFileSync(join(dir, "case.json"), "utf8")) });
    }
  }
  return out;
}

/** Saves a finding (its case files and what happened) under root/<target>/<id>/; returns the folder. */
export async function saveReproducer(finding, root = REGRESSIONS) {
  const key = findingKey(finding);
  const id = `${finding.backend}-${finding.outcome}-${createHash("sha256").update(key).digest("hex").slice(0, 8)}`;
  const dir = join(root, finding.target, id);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const [name, bytes] of Object.entries(finding.files)) await writeFile(join(dir, name), bytes);
  const meta = {
    target: finding.target,
    backend: finding.backend,
    seedModel: finding.seed,
    campaign: { seed: finding.campaignSeed, index: finding.index },
    mutation: finding.tags,
    outcome: finding.outcome,
    code: finding.code,
    message: finding.message,
    key,
    ...(finding.known && { expect: `known-${finding.outcome}`, issue: finding.known.issue, about: finding.known.about }),
  };
  await writeFile(join(dir, "case.json"), JSON.stringify(meta, null, 2) + "\n");
  return dir;
}

/**
 * Lays a case out in `dir` for the child: the mutated files, and for a Hugging Face or PEFT case links to
 * the seed folder's other `linkNames`.
 */
export async function writeCaseDir(dir, files, links, linkNames = HF_FILES) {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const [name, bytes] of Object.entries(files)) await writeFile(join(dir, name), bytes);
  if (links) for (const name of linkNames) if (!(name in files)) await symlink(join(links, name), join(dir, name));
}
