// Allowed: kernels/wasm/ starts worker threads and is not listed as portable.
import { Worker } from "node:worker_threads";

export const start = (url: URL) => new Worker(url);
