/**
 * A kernel worker thread: instantiates kernels.wasm on the shared memory and
 * runs its share of each job the main thread posts in the control block (see
 * protocol.ts) until told to quit.
 */
import { platform } from "#platform";
import { CONTROL_INTS, runShare, Slot, SPIN_LIMIT, ticketThreads, type KernelExports, type WorkerSetup } from "./protocol.js";
import { wasmApi } from "./webassembly.js";

const endpoint = await platform.workerEndpoint();
const setup = endpoint.setup as WorkerSetup;
const instance = new wasmApi.Instance(setup.module, { env: { memory: setup.memory } });
const exports = instance.exports as unknown as KernelExports;
const control = new Int32Array(setup.memory.buffer, setup.controlAddress, CONTROL_INTS);

let seen = Atomics.load(control, Slot.GENERATION);
endpoint.ready();

for (;;) {
  let spins = 0;
  while (Atomics.load(control, Slot.GENERATION) === seen) {
    if (++spins > SPIN_LIMIT) Atomics.wait(control, Slot.GENERATION, seen);
  }
  seen = Atomics.load(control, Slot.GENERATION);
  if (Atomics.load(control, Slot.QUIT)) break;
  const threads = ticketThreads(seen);
  if (setup.threadIndex >= threads) continue;
  try {
    runShare(exports, control, setup.threadIndex, threads);
  } catch {
    Atomics.store(control, Slot.FAILED, 1);
  }
  if (Atomics.sub(control, Slot.PENDING, 1) === 1) Atomics.notify(control, Slot.PENDING);
}
