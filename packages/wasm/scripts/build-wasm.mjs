#!/usr/bin/env node
// Compiles the AssemblyScript kernels (packages/wasm/assembly) to
// dist/src/kernels/wasm/kernels.wasm, next to the compiled host code that loads
// it with `new URL("./kernels.wasm", import.meta.url)`. The .wasm is a build
// output like the .js files (dist is not committed) and ships with them in the
// package's "files". Only npm's own devDependency `assemblyscript` is needed.
//
// Skips the compile when the .wasm is newer than every source, so the root
// `npm run build` stays quick; pass --force to rebuild anyway.
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const sourceDir = join(packageRoot, "assembly");
const output = join(packageRoot, "dist", "src", "kernels", "wasm", "kernels.wasm");

function newestSource() {
  let newest = statSync(fileURLToPath(import.meta.url)).mtimeMs;
  for (const name of readdirSync(sourceDir)) newest = Math.max(newest, statSync(join(sourceDir, name)).mtimeMs);
  return newest;
}

if (!process.argv.includes("--force") && existsSync(output) && statSync(output).mtimeMs >= newestSource()) {
  process.exit(0);
}
mkdirSync(dirname(output), { recursive: true });

const { error, stderr } = await asc.main([
  join(sourceDir, "index.ts"),
  "--outFile", output,
  "--optimizeLevel", "3",
  "--shrinkLevel", "0",
  // No allocator or garbage collector: the host owns all memory.
  "--runtime", "stub",
  // Assertions and bounds checks are the host's job (it validates every shape first).
  "--noAssert",
  // SIMD128 and shared memory (threads); relaxed SIMD would need a V8 flag on Node 20.
  "--enable", "simd,threads",
  // One memory, created by the host and shared by the worker threads' instances.
  "--importMemory",
  "--sharedMemory",
  "--initialMemory", "1",
  "--maximumMemory", "65536", // 4 GiB, the most a 32-bit address space reaches
  // AS112 warns that v128 values cross exported functions; only scalar functions are exported from the module.
  "--disableWarning", "112",
]);
if (error) {
  console.error(stderr.toString());
  console.error(`build-wasm: ${error.message}`);
  process.exit(1);
}
