/**
 * The engine: @infer/wasm's browser bundle (the @infer/core API with backend `wasm`
 * registered), copied beside the app as engine/ at build. It is imported at run time by URL,
 * not bundled into the app: its workers and kernel builds sit beside it, found from its own URL.
 */
import type * as Core from "@infer/core";

/** What the app uses of the bundle's exports. */
export type Engine = Pick<typeof Core, "loadModel" | "isTokenizerModel">;

let engine: Promise<Engine> | undefined;

/** The engine module, imported once; a failure (a build without it, an old browser) is BACKEND_UNAVAILABLE and is tried again next time. */
export function importEngine(): Promise<Engine> {
  // A URL built at run time: neither tsc nor esbuild should look for the bundle at build time.
  const url = new URL("./engine/index.js", import.meta.url).href;
  engine ??= (import(url) as Promise<Engine>).catch((error: unknown) => {
    engine = undefined;
    throw Object.assign(new Error(`the engine (${url}) could not be loaded: ${error instanceof Error ? error.message : String(error)}`), {
      code: "BACKEND_UNAVAILABLE",
    });
  });
  return engine;
}
