/**
 * The repository's browser-test harness (scripts/browser/index.mjs), loaded by URL because the
 * compiled tests run from dist/test, one folder deeper than this source.
 */
import type * as Harness from "../../../scripts/browser/index.mjs";

export const harness: typeof Harness = await import(new URL("../../../../scripts/browser/index.mjs", import.meta.url).href);
