/**
 * The repository's browser-test harness (scripts/browser/index.mjs), loaded by URL because the
 * compiled tests run from dist/test/browser, one folder deeper than this source.
 */
import type { Page } from "puppeteer-core";
import type * as Harness from "../../../../scripts/browser/index.mjs";

export const harness: typeof Harness = await import(new URL("../../../../../scripts/browser/index.mjs", import.meta.url).href);

/** Calls page/run.js's `name(infer, ...args)` in a page the test server serves, with the browser bundle imported as `infer`. */
export async function inPage<T>(page: Page, name: string, ...args: unknown[]): Promise<T> {
  return (await page.evaluate(
    async (name: string, args: unknown[]) => {
      const bundle = "/packages/wasm/dist/browser/index.js";
      const runner = "/packages/wasm/test/browser/page/run.js";
      const [infer, run] = await Promise.all([import(bundle), import(runner)]);
      return run[name](infer, ...args);
    },
    name,
    args,
  )) as T;
}
