// @infer/wasm: the portable engine. Importing this module registers backend "wasm".
export {};
