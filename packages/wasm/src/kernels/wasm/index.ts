/**
 * WebAssembly SIMD128 kernels with a worker pool: `createWasmKernels({ threads })`
 * returns a `Kernels` (matmul, matmulMany, matmulGated, attention) computing on one shared
 * WebAssembly.Memory. kernels.wasm is built from packages/wasm/assembly by
 * `npm run build:wasm -w @infer/wasm` (part of the root `npm run build`).
 *
 * Using them from a loader and forward pass:
 *  - Weights: copy each tensor's bytes once into `kernels.allocate(byteLength)`
 *    and build the WeightMatrix on that view; matmul then reads them in place.
 *    (A WeightMatrix whose bytes live elsewhere still works: it is copied in on
 *    first use and kept, keyed by its `data` array, so keep that array stable.)
 *  - KV cache: allocate each layer's keys and values with `allocate` (as
 *    Float32Array views on the returned bytes) to have attention read them in
 *    place; an ordinary Float32Array cache works too, its visible positions
 *    copied into staging memory on each call.
 *  - q/k/v projections: `matmulMany` prepares the shared input once and splits
 *    all their rows in one job; gate/up: `matmulGated` also applies SiLU /
 *    GELU-tanh in the same job.
 *  - `await kernels.dispose()` stops the worker threads (they never keep a
 *    process alive, disposed or not).
 */
export { createWasmKernels, relaxedSimdSupported, type WasmKernelOptions } from "./kernels.js";
