#!/usr/bin/env node
// Builds the chat app into dist/app, static files any web server can host:
//  - main.js (the page) and worker.js (the worker running the model), bundled by esbuild from
//    the modules tsc wrote to dist/src/app, for browsers;
//  - index.html and style.css, copied;
//  - engine/: @infer/wasm's browser bundle (its module, worker and kernel builds), copied whole:
//    the worker imports it by URL at run time, so its own URLs keep pointing beside it.
// Run by `npm run build` after tsc and scripts/bundle.mjs.
import { build } from "esbuild";
import { cpSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const pkg = new URL("..", import.meta.url).pathname;
const compiled = join(pkg, "dist/src/app");
const out = join(pkg, "dist/app");
const engine = join(pkg, "../wasm/dist/browser");

if (!existsSync(join(compiled, "main.js"))) {
  console.error("build-app: dist/src/app/main.js is missing (run tsc -b first)");
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { main: join(compiled, "main.js"), worker: join(compiled, "worker.js") },
  outdir: out,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["chrome111", "firefox111", "safari16.4"],
  sourcemap: true,
  logLevel: "warning",
});
for (const file of ["index.html", "style.css"]) cpSync(join(pkg, "src/app", file), join(out, file));
if (existsSync(join(engine, "index.js"))) cpSync(engine, join(out, "engine"), { recursive: true });
else console.warn("build-app: @infer/wasm has no browser bundle (packages/wasm/dist/browser): the app is built without its engine");
