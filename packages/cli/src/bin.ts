#!/usr/bin/env node
import { main } from "./main.js";

// A closed pipe (`infer run ... | head`) just means nobody reads any more: stop quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2));
