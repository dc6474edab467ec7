#!/usr/bin/env node
// The `infer` command. This file is committed, not built, so that it exists when npm installs the
// workspace and links it into node_modules/.bin; it runs the built CLI (`npm run build`).
try {
  await import("../dist/bundle/bin.js");
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes("dist/bundle/bin.js")) throw error;
  console.error("infer: the CLI is not built yet: run `npm run build` in the repository first");
  process.exitCode = 1;
}
