#!/usr/bin/env node
// npm run fuzz -- [--seconds N] [--cases N] [--first I] [--seed S] [--targets a,b] [--backends wasm,llama_cpp] [--jobs J]
//                 [--time-limit-ms T] [--memory-mb M] [--skip-known] [--real] [--save] [--quiet] [--trace] [--case target:index]
// Mutation fuzzing of every parser through the public API; see docs/reliability.md.
import { parseArgs } from "node:util";
import { BAD, DEFAULTS, OUTCOMES, runCampaign } from "./campaign.mjs";
import { saveReproducer, savedKeys, findingKey } from "./reproducers.mjs";
import { TARGETS } from "./targets.mjs";

const USAGE = `usage: npm run fuzz -- [--seconds N] [--cases N] [--first I] [--seed S] [--targets a,b] [--backends wasm,llama_cpp]
                     [--jobs J] [--time-limit-ms T] [--memory-mb M] [--skip-known] [--real] [--save] [--quiet]
                     [--trace] [--case target:index]      (docs/reliability.md)`;

const { values } = parseOrExit({
  options: {
    seconds: { type: "string" },
    cases: { type: "string" },
    first: { type: "string", default: "0" },
    seed: { type: "string", default: String(DEFAULTS.seed) },
    targets: { type: "string" },
    backends: { type: "string", default: DEFAULTS.backends.join(",") },
    jobs: { type: "string", default: String(DEFAULTS.jobs) },
    "time-limit-ms": { type: "string", default: String(DEFAULTS.timeLimitMs) },
    "memory-mb": { type: "string", default: String(DEFAULTS.memoryLimitMiB) },
    "skip-known": { type: "boolean", default: false },
    real: { type: "boolean", default: false },
    save: { type: "boolean", default: false },
    quiet: { type: "boolean", default: false },
    trace: { type: "boolean", default: false },
    case: { type: "string" },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

/** parseArgs, with a usage line and exit 2 instead of a stack trace for a bad command line. */
function parseOrExit(config) {
  try {
    return parseArgs(config);
  } catch (error) {
    console.error(`fuzz: ${error.message}\n${USAGE}`);
    process.exit(2);
  }
}

/**
 * --trace prints one line a case, to compare runs and versions of the fuzzer: a path inside a campaign's
 * work folder (named after its process, laid out as that version lays cases out) becomes `<case>`, or
 * `<case>/<file>` for a case's file.
 */
const caseFolderBlanked = (message = "") =>
  message.replace(/\/[^\s'"`:,)]*infer-fuzz-\d+[^\s'"`:,)]*/g, (path) => {
    const file = path.slice(path.lastIndexOf("/") + 1);
    return /\.[a-z]+$/.test(file) ? `<case>/${file}` : "<case>";
  });

const list = (text) => text?.split(",").map((s) => s.trim()).filter(Boolean);
const targets = list(values.targets);
for (const name of targets ?? []) {
  if (!TARGETS.some((t) => t.name === name)) throw new Error(`unknown target '${name}' (targets: ${TARGETS.map((t) => t.name).join(", ")})`);
}
if (!values.seconds && !values.cases) values.seconds = "60";
// --case target:index runs that one case of the campaign (the numbers a finding printed).
const only = values.case ? { target: values.case.split(":")[0], index: Number(values.case.split(":")[1]) } : undefined;

const result = await runCampaign({
  seed: Number(values.seed),
  targets,
  backends: list(values.backends),
  cases: values.cases ? Number(values.cases) : undefined,
  first: Number(values.first),
  seconds: values.seconds ? Number(values.seconds) : undefined,
  jobs: Number(values.jobs),
  timeLimitMs: Number(values["time-limit-ms"]),
  memoryLimitMiB: Number(values["memory-mb"]),
  skipKnown: values["skip-known"],
  real: values.real,
  only,
  onResult: values.quiet && !values.trace
    ? undefined
    : (r) => {
        if (values.trace) console.log(`trace\t${r.target}/${r.backend}\t${r.index}\t${r.outcome}\t${r.code ?? ""}\t${caseFolderBlanked(r.message)}`);
        if (BAD.has(r.outcome) && !values.quiet) console.log(`${r.known ? "known" : "NEW"} ${r.outcome} ${r.target}/${r.backend} #${r.index}: ${r.code ?? ""} ${(r.message ?? "").slice(0, 200)}`);
      },
});

console.log(`\nseed ${values.seed}, ${result.seconds.toFixed(1)} s, ${result.restarts} child restarts`);
const header = ["target/backend", "cases", "cases/s", ...OUTCOMES, "known", "skipped", "distinct-typed"];
console.log(header.join("\t"));
for (const s of result.stats) {
  const rate = s.ms > 0 ? (s.cases / (s.ms / 1000)).toFixed(1) : "-";
  console.log([`${s.target}/${s.backend}`, s.cases, rate, ...OUTCOMES.map((k) => s[k]), s.known, s.skipped, s.messages.size].join("\t"));
}

const fresh = result.findings.filter((f) => !f.known);
const already = savedKeys();
for (const finding of result.findings) {
  const saved = already.has(findingKey(finding));
  console.log(`${finding.known ? `known (${finding.known.id})` : "NEW"} ${finding.outcome} ${finding.target}/${finding.backend} x${finding.count} #${finding.index} [${finding.tags.join(", ")}]: ${(finding.message ?? finding.code ?? "").slice(0, 300)}${saved ? " (reproducer saved)" : ""}`);
  if (values.save && !saved) console.log(`  saved ${await saveReproducer(finding)}`);
}
if (fresh.length > 0) {
  console.log(`\n${fresh.length} new finding(s)`);
  process.exit(1);
}
