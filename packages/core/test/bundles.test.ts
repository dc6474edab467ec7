/**
 * Every package's "exports" and "bin" point at its bundles (scripts/bundle.mjs): each
 * bundle exports what the module tsc compiled exports, the portable core's bundle
 * reaches no node: module (as its sources import none: package.test.ts), and the
 * bin runs the bundled CLI.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const packagesDir = fileURLToPath(new URL("../../../", import.meta.url));

interface Manifest {
  name: string;
  exports?: Record<string, { types: string; default: string }>;
  bin?: Record<string, string>;
}

const manifests = readdirSync(packagesDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => ({ dir: join(packagesDir, entry.name), manifest: JSON.parse(readFileSync(join(packagesDir, entry.name, "package.json"), "utf8")) as Manifest }));

/** Export names of each file, imported in one child process (importing some registers backends). */
function exportNames(files: string[]): string[][] {
  const script = `const files = ${JSON.stringify(files)};
const names = [];
for (const file of files) names.push(Object.keys(await import(file)).sort());
console.log(JSON.stringify(names));`;
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })) as string[][];
}

it("every package export is a bundle with the same exports as the module tsc compiled", () => {
  const pairs: { label: string; bundle: string; compiled: string }[] = [];
  for (const { dir, manifest } of manifests) {
    for (const [key, target] of Object.entries(manifest.exports ?? {})) {
      assert.match(target.default, /^\.\/dist\/bundle\/[\w-]+\.js$/, `${manifest.name} exports["${key}"]`);
      pairs.push({ label: `${manifest.name} ${key}`, bundle: join(dir, target.default), compiled: join(dir, target.types.replace(/\.d\.ts$/, ".js")) });
    }
  }
  assert.ok(pairs.length >= 10, `${pairs.length} exports found`);
  const names = exportNames(pairs.flatMap(({ bundle, compiled }) => [bundle, compiled]));
  pairs.forEach(({ label }, i) => {
    assert.ok(names[2 * i]!.length > 0, `${label} exports nothing`);
    assert.deepEqual(names[2 * i], names[2 * i + 1], label);
  });
});

/** The bare specifiers `entry` (a file in core's dist/bundle) and the chunks it imports import, and how many files that is. */
function importsOf(entry: string): { specifiers: string[]; files: number } {
  const bundleDir = join(manifests.find(({ manifest }) => manifest.name === "@infer/core")!.dir, "dist", "bundle");
  const seen = new Set<string>();
  const specifiers: string[] = [];
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(join(bundleDir, file), "utf8");
    for (const match of source.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)) {
      const specifier = match[1]!;
      if (specifier.startsWith("./")) visit(specifier.slice(2));
      else specifiers.push(specifier);
    }
  };
  visit(entry.replace("./dist/bundle/", ""));
  return { specifiers, files: seen.size };
}

it("the @infer/core bundle (and every chunk it imports) imports nothing from node:", () => {
  const { exports } = manifests.find(({ manifest }) => manifest.name === "@infer/core")!.manifest;
  const portable = importsOf(exports!["."]!.default);
  assert.ok(portable.files >= 2, "index.js imports its chunks");
  assert.deepEqual(portable.specifiers, []);
  // The Node entry does reach node: modules, so the scan can see them.
  assert.ok(importsOf(exports!["./node"]!.default).specifiers.some((specifier) => specifier.startsWith("node:")));
});

it("each bin is a committed file (npm links it at install, before any build) that runs the bundled CLI", () => {
  const cli = manifests.find(({ manifest }) => manifest.bin !== undefined)!;
  for (const file of Object.values(cli.manifest.bin!)) {
    assert.doesNotMatch(file, /^\.\/dist\//, "a bin under dist does not exist when npm links it");
    const out = execFileSync(process.execPath, [join(cli.dir, file), "--version"], { encoding: "utf8" });
    assert.match(out, /^infer \d+\.\d+\.\d+/);
  }
});
