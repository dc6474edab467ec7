#!/usr/bin/env node
// Compiles the AssemblyScript kernels (packages/wasm/assembly) twice, next to
// the compiled host code that loads them (`new URL("./kernels.wasm", import.meta.url)`):
//   dist/src/kernels/wasm/kernels.wasm          SIMD128 and threads: runs on Node 20+
//   dist/src/kernels/wasm/kernels-relaxed.wasm  plus relaxed SIMD (ASC_FEATURE_RELAXED_SIMD
//                                               in the sources): the host picks it where the
//                                               runtime validates it (Node 22+, or Node 20
//                                               with --experimental-wasm-relaxed-simd)
// The .wasm files are build outputs like the .js files (dist is not committed)
// and ship with them in the package's "files". Only npm's own devDependency
// `assemblyscript` is needed.
//
// Skips the compile when the .wasm is newer than every source, so the root
// `npm run build` stays quick; pass --force to rebuild anyway.
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const sourceDir = join(packageRoot, "assembly");
const outputDir = join(packageRoot, "dist", "src", "kernels", "wasm");
const builds = [
  { output: join(outputDir, "kernels.wasm"), features: "simd,threads" },
  { output: join(outputDir, "kernels-relaxed.wasm"), features: "simd,threads,relaxed-simd" },
];

function newestSource() {
  let newest = statSync(fileURLToPath(import.meta.url)).mtimeMs;
  for (const name of readdirSync(sourceDir)) newest = Math.max(newest, statSync(join(sourceDir, name)).mtimeMs);
  return newest;
}

const force = process.argv.includes("--force");
const newest = newestSource();
mkdirSync(outputDir, { recursive: true });
for (const { output, features } of builds) {
  if (!force && existsSync(output) && statSync(output).mtimeMs >= newest) continue;
  await build(output, features);
}

async function build(output, features) {
  const { error, stderr } = await asc.main([
    join(sourceDir, "index.ts"),
    "--outFile", output,
    "--optimizeLevel", "3",
    "--shrinkLevel", "0",
    // No allocator or garbage collector: the host owns all memory.
    "--runtime", "stub",
    // Assertions and bounds checks are the host's job (it validates every shape first).
    "--noAssert",
    // SIMD128 and shared memory (threads), and relaxed SIMD in the second build.
    "--enable", features,
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
}
