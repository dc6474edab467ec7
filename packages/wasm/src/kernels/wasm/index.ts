export { createWasmKernels, type WasmKernelOptions } from "./kernels.js";
