// Breaks portable-imports-no-node: the kernels' host side reaches Node only through #platform.
import { parentPort } from "node:worker_threads";

export const port = parentPort;
