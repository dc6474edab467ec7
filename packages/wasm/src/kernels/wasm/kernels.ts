/**
 * `createWasmKernels`: the Kernels interface on WebAssembly SIMD128 kernels
 * (assembly/, built to kernels.wasm next to this file) run by a pool of worker
 * threads on one shared WebAssembly.Memory.
 *
 * Weights are read in place from that memory. A loader that puts them there
 * with `allocate` (one copy at load) spares any later copy; a weight that lives
 * elsewhere is copied in on its first matmul and kept while its bytes are
 * reachable. Activations and outputs are staged through scratch buffers that
 * only grow, so a token's matmuls allocate nothing; views from `allocate` used
 * as x or out skip the staging. Attention reads a KV cache in `allocate`
 * memory in place and stages one that lives elsewhere (see attention-host.ts).
 */
import { InferenceError } from "@infer/core";
import { platform } from "#platform";
import type { AttentionKernel, GemmShape, Kernels, MatrixType, TrainingAttentionKernel, WeightMatrix } from "../types.js";
import type { Activation, addBias, addInPlace, applyRope, rmsNorm } from "../ops.js";
import { SharedArena } from "./arena.js";
import { AttentionHost } from "./attention-host.js";
import { KernelContext } from "./context.js";
import { ElementwiseHost } from "./elementwise-host.js";
import { GemmHost } from "./gemm-host.js";
import { MatmulHost } from "./matmul-host.js";
import { TrainAttentionHost } from "./train-attention-host.js";
import { transposeAlign, TransposeHost } from "./transpose-host.js";
import { TrainOpsHost } from "./train-ops-host.js";
import { WorkerPool } from "./pool.js";
import { CONTROL_BYTES, type KernelExports } from "./protocol.js";
import { wasmApi, type WasmModule } from "./webassembly.js";

export interface WasmKernelOptions {
  /**
   * Threads computing each call, the calling thread included. Default: the machine's physical
   * cores (a browser's logical ones). Where workers cannot share memory (a page without
   * cross-origin isolation) it is 1 whatever is asked, noted once on the console.
   */
  threads?: number;
  /**
   * Bytes read (weights times batch, or keys and values) below which a call is
   * not worth waking another thread for: a call uses at most one thread per this
   * many bytes. Default 64 KiB (little work for one core, yet worth sharing since
   * between a decode step's calls the workers are polling, not asleep); 0 always uses every thread.
   */
  minBytesPerThread?: number;
  /**
   * Use the relaxed-SIMD build of the kernels (the products of the rows of a Q4_0
   * matrix past its groups of four, sixteen multiplies per instruction instead of eight). Default: where the runtime supports it
   * (`relaxedSimdSupported()`); true where it does not is an error, false
   * forces the baseline build. Results are the same bits either way.
   */
  relaxedSimd?: boolean;
}

/**
 * The two builds of assembly/ (scripts/build-wasm.mjs), compiled at most once each per process.
 * Each URL is written out whole, the form bundlers (and scripts/bundle.mjs's check) recognise.
 */
const BUILDS = {
  baseline: () => new URL("./kernels.wasm", import.meta.url),
  relaxed: () => new URL("./kernels-relaxed.wasm", import.meta.url),
} as const;
const compiled = new Map<keyof typeof BUILDS, Promise<WasmModule>>();

/**
 * A module whose one function uses `i16x8.relaxed_dot_i8x16_i7x16_s`: it
 * validates where the runtime has relaxed SIMD (Node 22+; Node 20 with
 * --experimental-wasm-relaxed-simd).
 */
const RELAXED_SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x07, 0x01, 0x60, 0x02, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128, v128) -> v128
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x0a, 0x0b, 0x01, 0x09, 0x00, 0x20, 0x00, 0x20, 0x01, 0xfd, 0x92, 0x02, 0x0b, // local.get 0, local.get 1, relaxed dot, end
]);

/** Whether this runtime runs WebAssembly relaxed SIMD (and so the faster kernels-relaxed.wasm). */
export function relaxedSimdSupported(): boolean {
  return wasmApi.validate(RELAXED_SIMD_PROBE);
}

function loadModule(build: keyof typeof BUILDS): Promise<WasmModule> {
  let module = compiled.get(build);
  if (module) return module;
  module = (async () => {
    const url = BUILDS[build]();
    let bytes: Uint8Array;
    try {
      bytes = await platform.readBinary(url);
    } catch (cause) {
      throw new InferenceError(
        "BACKEND_UNAVAILABLE",
        `${url.href} is missing: build it with \`npm run build:wasm -w @infer/wasm\``,
        { cause },
      );
    }
    try {
      return await wasmApi.compile(bytes);
    } catch (cause) {
      throw new InferenceError("BACKEND_UNAVAILABLE", `${url.href} does not compile (this runtime needs WebAssembly SIMD and threads)`, { cause });
    }
  })();
  compiled.set(build, module);
  module.catch(() => compiled.delete(build));
  return module;
}

let notedSingleThread = false;

/** The threads asked for (default: the cores), or 1 where workers cannot share memory. */
function threadsHere(asked: number | undefined): number {
  const why = platform.threadsUnavailable();
  if (why === undefined) return asked ?? platform.coreCount();
  if (!notedSingleThread) {
    notedSingleThread = true;
    console.info(`@infer/wasm: computing on one thread: ${why}.`);
  }
  return 1;
}

export async function createWasmKernels(options: WasmKernelOptions = {}): Promise<Kernels> {
  if (options.threads !== undefined && (!Number.isInteger(options.threads) || options.threads < 1)) {
    throw new InferenceError("INVALID_OPTION", `threads must be a positive integer, got ${options.threads}`);
  }
  const threads = threadsHere(options.threads);
  // 64 KiB: small models' smallest matrices (a 135M model's Q4_0 attention output) still split
  // across two threads, which pays off in decode; a lower bound splits nothing more that matters.
  const minBytesPerThread = options.minBytesPerThread ?? 64 * 1024;
  if (!(minBytesPerThread >= 0)) {
    throw new InferenceError("INVALID_OPTION", `minBytesPerThread must be >= 0, got ${minBytesPerThread}`);
  }
  const supported = relaxedSimdSupported();
  if (options.relaxedSimd !== undefined && typeof options.relaxedSimd !== "boolean") {
    throw new InferenceError("INVALID_OPTION", `relaxedSimd must be a boolean, got ${String(options.relaxedSimd)}`);
  }
  if (options.relaxedSimd === true && !supported) {
    throw new InferenceError(
      "INVALID_OPTION",
      "relaxedSimd: this runtime has no WebAssembly relaxed SIMD (it needs Node 22+, or Node 20 with --experimental-wasm-relaxed-simd)",
    );
  }
  let relaxed = options.relaxedSimd ?? supported;
  let module: WasmModule;
  try {
    module = await loadModule(relaxed ? "relaxed" : "baseline");
  } catch (error) {
    // Picked by detection only: a missing or refused relaxed build falls back to the baseline one.
    if (!relaxed || options.relaxedSimd === true) throw error;
    relaxed = false;
    module = await loadModule("baseline");
  }
  // The module's own heapBase is needed before the memory exists; a throwaway one-page memory answers it
  // (maximum 1: a shared memory reserves address space for its maximum up front).
  const probe = new wasmApi.Instance(module, {
    env: { memory: new wasmApi.Memory({ initial: 1, maximum: 1, shared: true }) },
  });
  const arena = new SharedArena((probe.exports as unknown as KernelExports).heapBase());
  const instance = new wasmApi.Instance(module, { env: { memory: arena.memory } });
  const exports = instance.exports as unknown as KernelExports;
  const controlAddress = arena.allocate(CONTROL_BYTES);
  const pool = await WorkerPool.start(module, exports, arena.memory, controlAddress, threads);
  return new WasmKernels(new KernelContext(arena, exports, pool, minBytesPerThread), relaxed);
}

class WasmKernels implements Kernels {
  readonly name: string;
  private readonly matmuls: MatmulHost;
  private readonly gemms: GemmHost;
  private readonly attentions: AttentionHost;
  private readonly elementwise: ElementwiseHost;
  private readonly transposes: TransposeHost;

  constructor(
    private readonly ctx: KernelContext,
    relaxed: boolean,
  ) {
    const threads = ctx.pool.threads;
    this.name = `wasm-${relaxed ? "relaxed-simd" : "simd"} (${threads} thread${threads === 1 ? "" : "s"})`;
    this.matmuls = new MatmulHost(ctx);
    this.gemms = new GemmHost(ctx);
    this.attentions = new AttentionHost(ctx);
    this.elementwise = new ElementwiseHost(ctx);
    this.transposes = new TransposeHost(ctx);
    this.trainingAttention = new TrainAttentionHost(ctx);
    this.rmsNorm = this.elementwise.rmsNorm;
    this.rope = this.elementwise.rope;
    this.addInPlace = this.elementwise.addInPlace;
    this.addBias = this.elementwise.addBias;
    this.argmax = this.elementwise.argmax;
    this.gatedBackward = this.elementwise.gatedBackward;
    this.gatedForward = this.elementwise.gatedForward;
    const trainOps = new TrainOpsHost(ctx);
    this.crossEntropy = trainOps.crossEntropy;
    this.transposeColumns = trainOps.transposeColumns;
  }

  matmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void {
    this.matmuls.matmul(out, w, x, batch);
  }

  matmulDense(out: Float32Array, w: Float32Array, rows: number, cols: number, x: Float32Array, batch: number): void {
    this.matmuls.matmulDense(out, w, rows, cols, x, batch);
  }

  gemm(c: Float32Array, a: Float32Array, b: Float32Array, shape: GemmShape): void {
    this.gemms.gemm(c, a, b, shape);
  }

  matmulMany(outs: readonly Float32Array[], ws: readonly WeightMatrix[], x: Float32Array, batch: number): void {
    this.matmuls.matmulMany(outs, ws, x, batch);
  }

  matmulGated(out: Float32Array, gate: WeightMatrix, up: WeightMatrix, x: Float32Array, batch: number, activation: Activation): void {
    this.matmuls.matmulGated(out, gate, up, x, batch, activation);
  }

  dequantizeTransposed(out: Float32Array, w: WeightMatrix, rowFrom: number, rowCount: number, colFrom: number, colCount: number): void {
    this.transposes.dequantizeTransposed(out, w, rowFrom, rowCount, colFrom, colCount);
  }

  dequantizeTransposedAlign(type: MatrixType): number {
    return transposeAlign(type);
  }

  prepareMatrix(w: WeightMatrix): WeightMatrix {
    return this.matmuls.prepareMatrix(w);
  }

  // The host halves' own functions (no forwarding closure with rest arguments: these run ~200 times a token).
  readonly rmsNorm: typeof rmsNorm;
  readonly argmax: (values: Float32Array) => number;
  readonly rope: typeof applyRope;
  readonly addInPlace: typeof addInPlace;
  readonly addBias: typeof addBias;
  readonly gatedBackward: NonNullable<Kernels["gatedBackward"]>;
  readonly gatedForward: NonNullable<Kernels["gatedForward"]>;
  readonly crossEntropy: NonNullable<Kernels["crossEntropy"]>;
  readonly transposeColumns: NonNullable<Kernels["transposeColumns"]>;

  readonly trainingAttention: TrainingAttentionKernel;

  readonly attention: AttentionKernel = (out, q, keys, values, params) => this.attentions.attention(out, q, keys, values, params);

  /** A view into the kernels' shared memory; see Kernels.allocate. */
  allocate(byteLength: number, align = 64): Uint8Array {
    this.ctx.checkOpen();
    return this.ctx.arena.view(this.ctx.arena.allocate(byteLength, align), byteLength);
  }

  release(view: Uint8Array): void {
    if (this.ctx.disposed) return;
    const address = this.ctx.arena.addressOf(view);
    if (address === undefined) throw new InferenceError("INTERNAL", "release: the view is not from this kernel's allocate()");
    this.ctx.arena.release(address);
  }

  async dispose(): Promise<void> {
    if (this.ctx.disposed) return;
    this.ctx.disposed = true;
    await this.ctx.pool.dispose();
  }
}
