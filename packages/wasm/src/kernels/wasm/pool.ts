/**
 * Worker threads sharing the kernels' memory. `run` is synchronous: the main
 * thread posts the job, runs share 0 itself and blocks in Atomics.wait (which
 * Node allows on its main thread) until the workers are done, so a kernel call
 * returns like a plain function. Workers are unref'd once started: a process
 * that never disposes the kernels still exits.
 */
import { Worker } from "node:worker_threads";
import { InferenceError } from "@infer/core";
import {
  CONTROL_INTS,
  JobArgs,
  MAX_THREADS,
  nextTicket,
  runShare,
  Slot,
  SPIN_LIMIT,
  type KernelExports,
  type WorkerSetup,
} from "./protocol.js";
import type { WasmMemory, WasmModule } from "./webassembly.js";

export class WorkerPool {
  private readonly control: Int32Array;
  private readonly workers: Worker[] = [];
  private broken: Error | undefined;
  private disposed = false;

  private constructor(
    private readonly exports: KernelExports,
    memory: WasmMemory,
    controlAddress: number,
  ) {
    this.control = new Int32Array(memory.buffer, controlAddress, CONTROL_INTS);
  }

  /** Starts `threads - 1` workers (the main thread is the last one) and waits until each has instantiated the module. */
  static async start(
    module: WasmModule,
    exports: KernelExports,
    memory: WasmMemory,
    controlAddress: number,
    threads: number,
  ): Promise<WorkerPool> {
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) {
      throw new InferenceError("INVALID_OPTION", `threads must be an integer from 1 to ${MAX_THREADS}, got ${threads}`);
    }
    const pool = new WorkerPool(exports, memory, controlAddress);
    const ready: Promise<void>[] = [];
    for (let threadIndex = 1; threadIndex < threads; threadIndex++) {
      const setup: WorkerSetup = { module, memory, controlAddress, threadIndex };
      // No inherited node flags: the worker needs none, and some (--input-type, --eval) make it fail to start.
      const worker = new Worker(new URL("./worker.js", import.meta.url), { workerData: setup, execArgv: [] });
      pool.workers.push(worker);
      ready.push(
        new Promise<void>((resolve, reject) => {
          // Unref'd only once ready: Deno ends a test whose pending promise waits on unref'd workers alone.
          worker.once("message", () => {
            worker.unref();
            resolve();
          });
          worker.once("error", reject);
        }),
      );
      // Recorded so that the next call fails at once rather than waiting on a worker that is gone.
      worker.on("error", (error) => (pool.broken ??= error));
      worker.on("exit", () => {
        if (!pool.disposed) pool.broken ??= new Error("a kernel worker exited");
      });
    }
    try {
      await Promise.all(ready);
    } catch (cause) {
      await pool.dispose();
      throw new InferenceError("BACKEND_UNAVAILABLE", "kernel worker threads failed to start", { cause });
    }
    return pool;
  }

  get threads(): number {
    return this.workers.length + 1;
  }

  /**
   * Runs job `op` with its arguments (`args`, written to the control block from
   * Slot.ARGS) on `threads` threads and returns when all are done.
   */
  run(op: number, args: JobArgs, threads: number): void {
    if (this.disposed) throw new InferenceError("CLOSED", "the WebAssembly kernels are disposed");
    if (this.broken) throw new InferenceError("INTERNAL", "a kernel worker thread failed", { cause: this.broken });
    const control = this.control;
    const active = Math.min(Math.max(1, threads), this.threads);
    control[Slot.OP] = op;
    // Always a JobArgs (never a plain array): this runs ~150 times a token, and one argument shape
    // keeps V8's optimized code for it from being thrown away when a second shape shows up.
    const values = args.values;
    for (let i = 0; i < args.length; i++) control[Slot.ARGS + i] = values[i]! | 0;
    Atomics.store(control, Slot.FAILED, 0);
    Atomics.store(control, Slot.CURSOR, 0);
    Atomics.store(control, Slot.PENDING, active - 1);
    if (active > 1) {
      Atomics.store(control, Slot.GENERATION, nextTicket(Atomics.load(control, Slot.GENERATION), active));
      Atomics.notify(control, Slot.GENERATION);
    }
    let failure: unknown;
    try {
      runShare(this.exports, control, 0, active);
    } catch (error) {
      failure = error;
    }
    // Even when share 0 failed, the workers are still writing: wait for them before anything reuses the buffers.
    this.waitForWorkers();
    if (failure !== undefined || Atomics.load(control, Slot.FAILED)) {
      throw new InferenceError("INTERNAL", "a WebAssembly kernel failed", { cause: failure });
    }
  }

  private waitForWorkers(): void {
    const control = this.control;
    let spins = 0;
    for (;;) {
      const pending = Atomics.load(control, Slot.PENDING);
      if (pending === 0) return;
      if (++spins <= SPIN_LIMIT) continue;
      // Workers count down even when their kernel traps (they catch it). A worker
      // killed outright mid-job is only noticed at the next call, through its
      // "error"/"exit" event, since this thread's event loop is parked here.
      Atomics.wait(control, Slot.PENDING, pending);
    }
  }

  /** Tells the workers to quit and waits for them to exit. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    Atomics.store(this.control, Slot.QUIT, 1);
    Atomics.store(this.control, Slot.GENERATION, nextTicket(Atomics.load(this.control, Slot.GENERATION), 0));
    Atomics.notify(this.control, Slot.GENERATION);
    await Promise.all(this.workers.map((worker) => worker.terminate()));
    this.workers.length = 0;
  }
}
