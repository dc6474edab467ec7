// The portable entry stays portable: the formats parse and write bytes in memory, and only
// @infer/formats/node touches files.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const packageDir = fileURLToPath(new URL("../../", import.meta.url));
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g;

/** What `file` imports from outside its own folder, following its relative imports. */
function externalImports(file: string, seen = new Set<string>()): Set<string> {
  const found = new Set<string>();
  if (seen.has(file)) return found;
  seen.add(file);
  for (const [, specifier] of readFileSync(file, "utf8").matchAll(IMPORT)) {
    if (specifier!.startsWith(".")) for (const inner of externalImports(join(file, "..", specifier!), seen)) found.add(inner);
    else found.add(specifier!);
  }
  return found;
}

it("the @infer/formats bundle (and every chunk it imports) imports @infer/core alone, nothing from node:", () => {
  const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { exports: Record<string, { default: string }> };
  assert.deepEqual([...externalImports(join(packageDir, manifest.exports["."]!.default))], ["@infer/core"]);
  // The Node entry does reach node: modules, so the scan can see them.
  assert.ok([...externalImports(join(packageDir, manifest.exports["./node"]!.default))].some((s) => s.startsWith("node:")));
});

it("the portable sources (all of src except node/) import nothing from node:", () => {
  const srcDir = join(packageDir, "src");
  const offenders = readdirSync(srcDir, { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts") && !path.startsWith("node/"))
    .filter((path) => [...readFileSync(join(srcDir, path), "utf8").matchAll(IMPORT)].some(([, specifier]) => specifier!.startsWith("node:")));
  assert.deepEqual(offenders, []);
});
