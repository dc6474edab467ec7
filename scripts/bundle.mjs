#!/usr/bin/env node
// Bundles each package's compiled modules (dist/src, written by tsc) into a few ES modules
// under dist/bundle, which the package's "exports" point at.
//
// Why: Node's ES module loader does work and leaves garbage for every module it loads, and
// importing @infer/core and @infer/wasm loads one module per source file, several times as
// many as the bundles. The bundles import in a fraction of the time, and the loading leaves
// V8's heap smaller, so a run's peak memory is lower too (docs/performance.md, "Peak memory").
//
// What is bundled:
//  - every export whose "default" is ./dist/bundle/NAME.js, from the module its "types" names
//    (./dist/src/PATH.d.ts -> ./dist/src/PATH.js), read from each package.json;
//  - modules reached otherwise (ALSO_BUNDLED), each as an entry of its own, and files copied,
//    flat beside the bundles: what the code loads by URL at run time (`new URL("./x",
//    import.meta.url)` finds them there; the outputs are checked for any such URL that points at
//    nothing), and what a package's "bin" runs (the bin itself is a committed file outside dist,
//    so that it exists when npm links it at install).
// Other packages (node:*, @infer/*, dependencies) and "#" subpath imports stay imports, so every
// package has one copy of its state (the backend registry, error classes) however it is reached.
import { build } from "esbuild";
import { copyFileSync, existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { basename, join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const DIST = "./dist/src/";
const BUNDLE = "./dist/bundle/";

/** Per package, relative to dist/src: modules bundled as entries of their own, and files copied. */
const ALSO_BUNDLED = {
  // The worker thread and the kernel builds, loaded by URL.
  "@infer/wasm": { modules: ["kernels/wasm/worker.js"], files: ["kernels/wasm/kernels.wasm", "kernels/wasm/kernels-relaxed.wasm"] },
  // The child processes of an isolated model and of the GPU probe, started by URL.
  "@infer/llama-cpp": { modules: ["isolate-child.js", "gpu-probe-child.js"] },
  // What bin/infer.js imports.
  "@infer/cli": { modules: ["bin.js"] },
};

/**
 * Self-contained browser builds, per package: one ES module with every dependency inside (for
 * `<script type="module">` without a bundler or import map), the modules loaded by URL beside it
 * as bundles of their own, and the files copied. Written to dist/browser.
 */
const BROWSER_BUNDLES = {
  "@infer/wasm": { entry: "browser.js", modules: ["kernels/wasm/worker.js"], files: ALSO_BUNDLED["@infer/wasm"].files },
  // hf: references to URLs, beside the engine's bundle (it has its own copy of @infer/core: compare error codes, not classes).
  "@infer/hub": { entry: "browser.js", modules: [], files: [] },
};

function fail(message) {
  console.error(`bundle: ${message}`);
  process.exit(1);
}

/** Entry name (the bundle file's name without .js) -> source module, for one package. */
function entriesOf(pkg, dir) {
  const entries = new Map();
  const add = (name, source, field) => {
    if (entries.has(name) && entries.get(name) !== source) fail(`${pkg.name}: ${field} names ${BUNDLE}${name}.js for two modules`);
    if (!existsSync(join(dir, source))) fail(`${pkg.name}: ${field}: ${source} is missing (run tsc -b first)`);
    entries.set(name, source);
  };
  for (const [key, target] of Object.entries(pkg.exports ?? {})) {
    const { types, default: main } = target;
    if (!main?.startsWith(BUNDLE)) fail(`${pkg.name}: exports["${key}"].default should be ${BUNDLE}NAME.js`);
    if (!types?.startsWith(DIST) || !types.endsWith(".d.ts")) fail(`${pkg.name}: exports["${key}"].types should be ${DIST}PATH.d.ts`);
    add(basename(main, ".js"), `${types.slice(0, -".d.ts".length)}.js`, `exports["${key}"]`);
  }
  for (const module of ALSO_BUNDLED[pkg.name]?.modules ?? []) add(basename(module, ".js"), `${DIST}${module}`, "ALSO_BUNDLED");
  return entries;
}

/** Fails when a bundle builds a URL from import.meta.url to a file that is not beside it. */
function checkUrls(outdir, name) {
  for (const file of readdirSync(outdir).filter((f) => f.endsWith(".js"))) {
    const text = readFileSync(join(outdir, file), "utf8");
    for (const match of text.matchAll(/new URL\(\s*([^,)]+),\s*import\.meta\.url\s*\)/g)) {
      const path = /^["'](\.\/[^"'/]+)["']$/.exec(match[1].trim())?.[1];
      if (!path) fail(`${name}: ${file} loads ${match[1]} by URL, which cannot be checked: write the URL as new URL("./name", import.meta.url)`);
      if (!existsSync(join(outdir, path))) fail(`${name}: ${file} loads ${path} by URL, which is not in ${BUNDLE}`);
    }
  }
}

const packages = readdirSync(join(root, "packages")).sort();
for (const folder of packages) {
  const dir = join(root, "packages", folder);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const entries = entriesOf(pkg, dir);
  if (entries.size === 0) continue;
  const outdir = join(dir, BUNDLE);
  rmSync(outdir, { recursive: true, force: true });
  await build({
    absWorkingDir: dir,
    entryPoints: Object.fromEntries(entries),
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    // Subpath imports ("#platform" in @infer/wasm) stay imports too: package.json's "imports"
    // picks the Node or browser module by condition where the bundle runs (or is bundled again).
    external: ["#*"],
    // Our own "sideEffects" fields are hints for an application's bundler; here every module's
    // top-level code is kept as tsc wrote it.
    ignoreAnnotations: true,
    sourcemap: true,
    logLevel: "warning",
  });
  for (const file of ALSO_BUNDLED[pkg.name]?.files ?? []) copyFileSync(join(dir, DIST, file), join(outdir, basename(file)));
  checkUrls(outdir, pkg.name);
  const browser = BROWSER_BUNDLES[pkg.name];
  if (browser) await bundleForBrowser(pkg.name, dir, browser);
}

async function bundleForBrowser(name, dir, { entry, modules, files }) {
  const outdir = join(dir, "dist", "browser");
  rmSync(outdir, { recursive: true, force: true });
  const entryPoints = { index: `${DIST}${entry}` };
  for (const module of modules) entryPoints[basename(module, ".js")] = `${DIST}${module}`;
  await build({
    absWorkingDir: dir,
    entryPoints,
    outdir,
    bundle: true,
    // No shared chunks: the page imports index.js alone, and each worker is one file too.
    splitting: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    sourcemap: true,
    logLevel: "warning",
  });
  for (const file of files) copyFileSync(join(dir, DIST, file), join(outdir, basename(file)));
  checkUrls(outdir, `${name} (browser)`);
  for (const file of readdirSync(outdir).filter((f) => f.endsWith(".js"))) {
    const found = /\bfrom\s*["'](node:[^"']+)["']/.exec(readFileSync(join(outdir, file), "utf8"));
    if (found) fail(`${name} (browser): ${file} imports ${found[1]}, which no browser has`);
  }
}
