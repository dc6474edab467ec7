import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

// dist/test/package.test.js -> the package folder and the repository root.
const pkgDir = fileURLToPath(new URL("../../", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

function importKeys(specifier: string): string[] {
  const out = execFileSync(
    process.execPath,
    ["--input-type=module", "-e", `import(${JSON.stringify(specifier)}).then((m) => console.log(JSON.stringify(Object.keys(m))))`],
    { cwd: repoRoot, encoding: "utf8" },
  );
  return JSON.parse(out) as string[];
}

it("@infer/core resolves from the repository root and exports the API", () => {
  const keys = importKeys("@infer/core");
  for (const name of [
    "InferenceError",
    "isInferenceError",
    "ERROR_CODES",
    "BaseTextModel",
    "SequenceStopper",
    "register",
    "unregister",
    "getBackend",
    "listBackends",
    "defaultBackend",
    "loadModel",
    "loadTrainable",
    "capabilitiesOf",
    "supportedCapabilities",
    "ProbeBus",
    "summarizeLogits",
    "validateGenerateOptions",
    "resolveGenerateOptions",
    "DEFAULT_GENERATE_OPTIONS",
    "makeMetrics",
    "isTokenizerModel",
  ]) {
    assert.ok(keys.includes(name), `@infer/core does not export ${name}`);
  }
});

it("@infer/core/node and @infer/core/testing resolve too", () => {
  const node = importKeys("@infer/core/node");
  for (const name of ["detectFormat", "nodeHost", "isGgufFile", "isHfFolder"]) {
    assert.ok(node.includes(name), `@infer/core/node does not export ${name}`);
  }
  assert.ok(importKeys("@infer/core/testing").includes("runConformanceSuite"));
});

it("core has no runtime dependencies", () => {
  const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as Record<string, unknown>;
  assert.equal(manifest.dependencies, undefined);
  assert.equal(manifest.peerDependencies, undefined);
});
