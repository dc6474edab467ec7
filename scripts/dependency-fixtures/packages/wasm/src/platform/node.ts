// Allowed: platform/node.ts is the Node side of the engine's one platform seam.
import { Worker } from "node:worker_threads";

export const start = (url: URL) => new Worker(url);
