// Breaks portable-imports-no-node: core outside node/ and testing/ is portable.
import { readFileSync } from "node:fs";

export const read = readFileSync;
