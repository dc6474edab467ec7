/**
 * The browser bundle's entry (dist/browser/index.js, see scripts/bundle.mjs): @infer/core's whole
 * API with backend "wasm" registered, for a page that imports one ES module and no bundler.
 */
export * from "@infer/core";
export * from "./index.js";
