/**
 * `createWasmKernels`: the Kernels interface on WebAssembly SIMD128 kernels
 * (assembly/, built to kernels.wasm next to this file) run by a pool of worker
 * threads on one shared WasmMemory.
 *
 * Weights are read in place from that memory. A loader that puts them there
 * with `allocate` (one copy at load) spares any later copy; a weight that lives
 * elsewhere is copied in on its first matmul and kept while its bytes are
 * reachable. Activations and outputs are staged through scratch buffers that
 * only grow, so a token's matmuls allocate nothing; views from `allocate` used
 * as x or out skip the staging.
 *
 * Attention runs in WebAssembly when the KV cache (keys and values) lives in
 * `allocate` memory; a cache elsewhere goes to the reference attention, since
 * copying a cache in on every call would cost as much as reading it.
 */
import { readFile } from "node:fs/promises";
import { InferenceError } from "@infer/core";
import { GgmlType, type AttentionKernel, type AttentionParams, type Kernels, type WeightMatrix } from "../types.js";
import { rowBytes, typeName } from "../../formats/ggml-types.js";
import { referenceAttention, referenceMatmul } from "../reference.js";
import { SharedArena } from "./arena.js";
import { WorkerPool } from "./pool.js";
import { CONTROL_BYTES, floatToBits, Op, type KernelExports } from "./protocol.js";
import { physicalCoreCount } from "./cores.js";
import { wasmApi, type WasmModule } from "./webassembly.js";

export interface WasmKernelOptions {
  /** Threads computing each call, the calling thread included. Default: the machine's physical cores. */
  threads?: number;
  /**
   * Weight bytes (times batch) below which a call is not worth waking another
   * thread for: a call uses at most one thread per this many bytes. Default 32 KiB;
   * 0 always uses every thread.
   */
  minBytesPerThread?: number;
}

/** Types kernels.wasm reads itself; others go through the reference kernel. */
const WASM_TYPES: ReadonlySet<GgmlType> = new Set([
  GgmlType.F32,
  GgmlType.F16,
  GgmlType.BF16,
  GgmlType.Q8_0,
  GgmlType.Q4_0,
  GgmlType.Q4_K,
  GgmlType.Q6_K,
]);
const FLOAT_TYPES: ReadonlySet<GgmlType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);
/** Activations are quantized in blocks of this many values (assembly/quantize.ts). */
const ACTIVATION_BLOCK = 32;

let compiled: Promise<WasmModule> | undefined;

/** Compiles kernels.wasm once per process. */
function loadModule(): Promise<WasmModule> {
  compiled ??= (async () => {
    const url = new URL("./kernels.wasm", import.meta.url);
    let bytes: Buffer;
    try {
      bytes = await readFile(url);
    } catch (cause) {
      throw new InferenceError(
        "BACKEND_UNAVAILABLE",
        `${url.pathname} is missing: build it with \`npm run build:wasm -w @infer/wasm\``,
        { cause },
      );
    }
    try {
      return await wasmApi.compile(bytes);
    } catch (cause) {
      throw new InferenceError("BACKEND_UNAVAILABLE", `${url.pathname} does not compile (this runtime needs WebAssembly SIMD and threads)`, { cause });
    }
  })();
  compiled.catch(() => (compiled = undefined));
  return compiled;
}

export async function createWasmKernels(options: WasmKernelOptions = {}): Promise<Kernels> {
  const threads = options.threads ?? physicalCoreCount();
  const minBytesPerThread = options.minBytesPerThread ?? 32 * 1024;
  if (!Number.isInteger(threads) || threads < 1) {
    throw new InferenceError("INVALID_OPTION", `threads must be a positive integer, got ${threads}`);
  }
  if (!(minBytesPerThread >= 0)) {
    throw new InferenceError("INVALID_OPTION", `minBytesPerThread must be >= 0, got ${minBytesPerThread}`);
  }
  const module = await loadModule();
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
  return new WasmKernels(arena, exports, pool, minBytesPerThread);
}

/** A scratch buffer in the arena that is replaced by a larger one when a call needs more. */
class Scratch {
  address = 0;
  private capacity = -1;
  constructor(private readonly arena: SharedArena) {}

  ensure(byteLength: number): number {
    if (byteLength > this.capacity) {
      if (this.capacity >= 0) this.arena.release(this.address);
      // Rounded up to a power of two, so slowly growing shapes reallocate a few times only.
      this.capacity = 2 ** Math.ceil(Math.log2(Math.max(byteLength, 4096)));
      this.address = this.arena.allocate(this.capacity);
    }
    return this.address;
  }
}

class WasmKernels implements Kernels {
  readonly name: string;
  private readonly residentWeights = new WeakMap<Uint8Array, number>();
  private readonly releaseWhenCollected = new FinalizationRegistry<number>((address) => {
    if (!this.disposed) this.arena.release(address);
  });
  private readonly xStage: Scratch;
  private readonly outStage: Scratch;
  private readonly xQuants: Scratch;
  private readonly xScales: Scratch;
  private readonly xSums: Scratch;
  private readonly xQuantSums: Scratch;
  private readonly qStage: Scratch;
  private readonly tokenStage: Scratch;
  private readonly scores: Scratch;
  private readonly rowDecode: Scratch;
  private disposed = false;

  constructor(
    private readonly arena: SharedArena,
    private readonly exports: KernelExports,
    private readonly pool: WorkerPool,
    private readonly minBytesPerThread: number,
  ) {
    this.name = `wasm-simd (${pool.threads} thread${pool.threads === 1 ? "" : "s"})`;
    this.xStage = new Scratch(arena);
    this.outStage = new Scratch(arena);
    this.xQuants = new Scratch(arena);
    this.xScales = new Scratch(arena);
    this.xSums = new Scratch(arena);
    this.xQuantSums = new Scratch(arena);
    this.qStage = new Scratch(arena);
    this.tokenStage = new Scratch(arena);
    this.scores = new Scratch(arena);
    this.rowDecode = new Scratch(arena);
  }

  matmul(out: Float32Array, w: WeightMatrix, x: Float32Array, batch: number): void {
    if (this.disposed) throw new InferenceError("CLOSED", "the WebAssembly kernels are disposed");
    const { type, rows, cols } = w;
    if (!Number.isInteger(batch) || batch < 1 || !Number.isInteger(rows) || rows < 1 || !Number.isInteger(cols) || cols < 1) {
      throw new InferenceError("INTERNAL", `matmul shape [${batch}, ${cols}] x [${rows}, ${cols}]ᵀ is not positive integers`);
    }
    if (x.length < batch * cols || out.length < batch * rows) {
      throw new InferenceError("INTERNAL", `matmul buffers too small for [${batch}, ${cols}] x [${rows}, ${cols}]ᵀ`);
    }
    const weightBytes = rowBytes(type, cols) * rows; // throws for unknown types and partial blocks
    if (w.data.byteLength < weightBytes) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `${typeName(type)} weight [${rows}, ${cols}] needs ${weightBytes} bytes, has ${w.data.byteLength}`,
      );
    }
    if (!WASM_TYPES.has(type) || (!FLOAT_TYPES.has(type) && cols % ACTIVATION_BLOCK !== 0)) {
      // Q4_1, Q5_0, Q5_1, Q5_K: rare in current models; the plain TypeScript kernel reads them.
      referenceMatmul(out, w, x, batch);
      return;
    }

    const weights = this.resident(w.data, weightBytes);
    const arena = this.arena;
    const elements = batch * cols;
    let xAddress = arena.addressOf(x);
    if (xAddress === undefined) {
      xAddress = this.xStage.ensure(elements * 4);
      new Float32Array(arena.heap.buffer, xAddress, elements).set(x.subarray(0, elements));
    }
    let xq = 0;
    let xd = 0;
    let xs = 0;
    let xb = 0;
    if (!FLOAT_TYPES.has(type)) {
      const blocks = elements / ACTIVATION_BLOCK;
      xq = this.xQuants.ensure(elements * 2); // int16
      xd = this.xScales.ensure(blocks * 4);
      xs = this.xSums.ensure(blocks * 4);
      xb = this.xQuantSums.ensure(blocks * 4);
      this.exports.quantizeActivations(xAddress, batch, cols, xq, xd, xs, xb);
    }
    const outAddress = arena.addressOf(out) ?? this.outStage.ensure(batch * rows * 4);

    const work = weightBytes * batch;
    const threads = this.minBytesPerThread > 0 ? Math.max(1, Math.floor(work / this.minBytesPerThread)) : this.pool.threads;
    // With batch > 1 each thread decodes a row at a time into its own slice of this scratch.
    const scratchStride = batch > 1 ? Math.ceil(this.exports.decodeScratchBytes(cols) / 64) * 64 : 0;
    const scratch = batch > 1 ? this.rowDecode.ensure(scratchStride * this.pool.threads) : 0;
    this.pool.run(
      Op.MATMUL,
      [type, outAddress, weights, rows, cols, xAddress, xq, xd, xs, xb, batch, scratch, scratchStride],
      threads,
    );

    if (arena.addressOf(out) === undefined) {
      out.set(new Float32Array(arena.heap.buffer, outAddress, batch * rows));
    }
  }

  readonly attention: AttentionKernel = (out, q, keys, values, params) => this.runAttention(out, q, keys, values, params);

  private runAttention(out: Float32Array, q: Float32Array, keys: Float32Array, values: Float32Array, p: AttentionParams): void {
    if (this.disposed) throw new InferenceError("CLOSED", "the WebAssembly kernels are disposed");
    const arena = this.arena;
    const keysAddress = arena.addressOf(keys);
    const valuesAddress = arena.addressOf(values);
    if (keysAddress === undefined || valuesAddress === undefined) {
      referenceAttention(out, q, keys, values, p);
      return;
    }
    const { tokens, numHeads, numKVHeads, headDim, slotLength, window } = p;
    const counts = { tokens, numHeads, numKVHeads, headDim, slotLength };
    for (const [name, value] of Object.entries(counts)) {
      if (!Number.isInteger(value) || value < (name === "tokens" ? 0 : 1)) {
        throw new InferenceError("INTERNAL", `attention: ${name} must be a positive integer, got ${value}`);
      }
    }
    if (tokens === 0) return;
    if (numHeads % numKVHeads !== 0) {
      throw new InferenceError("INTERNAL", `attention: ${numHeads} query heads do not group over ${numKVHeads} KV heads`);
    }
    const width = numHeads * headDim; // floats per token in q and out
    const slotFloats = slotLength * numKVHeads * headDim;
    const slots = Math.floor(Math.min(keys.length, values.length) / slotFloats);
    if (q.length < tokens * width || out.length < tokens * width) {
      throw new InferenceError("INTERNAL", `attention: q and out need ${tokens * width} floats`);
    }
    let visible = 0; // cached positions read, over all tokens
    for (let t = 0; t < tokens; t++) {
      const position = p.positions[t]!;
      const seq = p.seqIds[t]!;
      if (!(position >= 0 && position < slotLength && seq >= 0 && seq < slots)) {
        throw new InferenceError(
          "INTERNAL",
          `attention: token ${t} at position ${position} of slot ${seq} is outside the cache (${slots} slots x ${slotLength})`,
        );
      }
      visible += window > 0 ? Math.min(position + 1, window) : position + 1;
    }

    let qAddress = arena.addressOf(q);
    if (qAddress === undefined) {
      qAddress = this.qStage.ensure(tokens * width * 4);
      new Float32Array(arena.heap.buffer, qAddress, tokens * width).set(q.subarray(0, tokens * width));
    }
    const tokenAddress = this.tokenStage.ensure(tokens * 8);
    const tokenInts = new Int32Array(arena.heap.buffer, tokenAddress, tokens * 2); // [positions | seqIds]
    tokenInts.set(p.positions.subarray(0, tokens));
    tokenInts.set(p.seqIds.subarray(0, tokens), tokens);
    const outAddress = arena.addressOf(out) ?? this.outStage.ensure(tokens * width * 4);
    const scoresStride = slotLength * 8; // f64 per position
    const scores = this.scores.ensure(scoresStride * this.pool.threads);

    const work = visible * numHeads * headDim * 8; // bytes of keys and values read
    const threads = this.minBytesPerThread > 0 ? Math.max(1, Math.floor(work / this.minBytesPerThread)) : this.pool.threads;
    this.pool.run(
      Op.ATTENTION,
      [
        outAddress,
        qAddress,
        keysAddress,
        valuesAddress,
        tokenAddress,
        tokenAddress + tokens * 4,
        numHeads,
        numKVHeads,
        headDim,
        slotLength,
        floatToBits(p.scale),
        window,
        floatToBits(p.softcap),
        scores,
        scoresStride,
        tokens * numHeads,
      ],
      threads,
    );
    if (arena.addressOf(out) === undefined) {
      out.set(new Float32Array(arena.heap.buffer, outAddress, tokens * width));
    }
  }

  /** A view into the kernels' shared memory; see Kernels.allocate. */
  allocate(byteLength: number, align = 64): Uint8Array {
    if (this.disposed) throw new InferenceError("CLOSED", "the WebAssembly kernels are disposed");
    return this.arena.view(this.arena.allocate(byteLength, align), byteLength);
  }

  release(view: Uint8Array): void {
    if (this.disposed) return;
    const address = this.arena.addressOf(view);
    if (address === undefined) throw new InferenceError("INTERNAL", "release: the view is not from this kernel's allocate()");
    this.arena.release(address);
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.pool.dispose();
  }

  /** The address of the weight bytes in the arena, copying them in on first use when they live elsewhere. */
  private resident(data: Uint8Array, byteLength: number): number {
    const inPlace = this.arena.addressOf(data);
    if (inPlace !== undefined) return inPlace;
    let address = this.residentWeights.get(data);
    if (address === undefined) {
      address = this.arena.allocate(byteLength);
      this.arena.heap.set(data.subarray(0, byteLength), address);
      this.residentWeights.set(data, address);
      this.releaseWhenCollected.register(data, address);
    }
    return address;
  }
}
