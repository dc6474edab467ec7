/**
 * The type of "#platform" for the compiler: package.json's "imports" points the "types" condition
 * here, and the runtime conditions at node.ts or browser.ts, which each export this `platform`.
 */
import type { Platform } from "./types.js";

export declare const platform: Platform;
