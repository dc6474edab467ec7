/**
 * How the main thread hands one kernel call to the worker threads: a small
 * control block of int32s inside the shared memory. The main thread writes the
 * job, bumps GENERATION and notifies; every thread taking part (the main one is
 * thread 0) runs its share of the rows; workers count PENDING down and the
 * last one notifies the main thread, which waits for PENDING to reach 0.
 * Atomics give the ordering: writes before an Atomics store are seen by a
 * thread whose Atomics load observes it.
 */
import type { WasmMemory, WasmModule } from "./webassembly.js";

/** The module's exports (assembly/index.ts); addresses are byte offsets into the shared memory. */
export interface KernelExports {
  heapBase(): number;
  rowBytes(type: number, cols: number): number;
  decodeScratchBytes(cols: number): number;
  decodeSinkBytes(): number;
  quantizeActivations(x: number, count: number, cols: number, xq: number, xd: number, xs: number, xb: number): void;
  activationQuantBytes(count: number, cols: number): number;
  activationScaleBytes(count: number, cols: number): number;
  interleave(type: number, w: number, rows: number, cols: number, scratch: number): void;
  matmul(
    type: number,
    out: number,
    w: number,
    rows: number,
    cols: number,
    x: number,
    xq: number,
    xd: number,
    xs: number,
    xb: number,
    batch: number,
    scratch: number,
    rowStart: number,
    rowEnd: number,
    outStride: number,
  ): void;
  transposeScratchBytes(count: number): number;
  dequantizeTransposed(
    type: number,
    w: number,
    rows: number,
    cols: number,
    from: number,
    count: number,
    out: number,
    outStride: number,
    rowStart: number,
    rowEnd: number,
    scratch: number,
  ): void;
  gatedActivation(out: number, gate: number, up: number, rows: number, batch: number, rowStart: number, rowEnd: number, kind: number, upStride: number): void;
  gatedBackward(dGate: number, dUp: number, dOut: number, gate: number, up: number, count: number, kind: number): void;
  gemmScratchBytes(): number;
  gemm(c: number, cRow: number, a: number, aRow: number, aStep: number, b: number, bRow: number, bTransposed: number, m: number, n: number, k: number, accumulate: number, scratch: number): void;
  rmsNorm(out: number, x: number, weight: number, rows: number, dim: number, eps: number, unitOffset: number): void;
  crossEntropyRows(logits: number, targets: number, losses: number, vocab: number, gradScale: number, gradient: number, start: number, end: number): void;
  transposeColumns(src: number, cols: number, from: number, count: number, dst: number, rows: number, size: number, rowStart: number, rowEnd: number): void;
  rope(x: number, tokens: number, heads: number, headDim: number, cos: number, sin: number, pairs: number, neox: number): void;
  addRepeated(x: number, y: number, count: number, period: number): void;
  argmax(x: number, count: number): number;
  attention(
    out: number,
    q: number,
    keys: number,
    values: number,
    positions: number,
    seqIds: number,
    numHeads: number,
    numKVHeads: number,
    headDim: number,
    slotLength: number,
    scale: number,
    window: number,
    softcap: number,
    scores: number,
    itemStart: number,
    itemEnd: number,
    itemStep: number,
    kvEncoding: number,
    partials: number,
    chunks: number,
  ): void;
  attentionCombine(out: number, partials: number, positions: number, tokens: number, numHeads: number, headDim: number, window: number, chunks: number): void;
  attentionChunks(positions: number): number;
  attentionScratchBytes(slotLength: number, group: number, headDim: number, kvEncoding: number): number;
  attentionRecordBytes(headDim: number): number;
  trainAttentionScratchBytes(span: number): number;
  trainAttentionForward(
    out: number,
    lse: number,
    q: number,
    k: number,
    v: number,
    first: number,
    numHeads: number,
    numKVHeads: number,
    headDim: number,
    scale: number,
    scores: number,
    itemStart: number,
    itemEnd: number,
    itemStep: number,
  ): void;
  trainAttentionBackward(
    dq: number,
    dk: number,
    dv: number,
    dOut: number,
    lse: number,
    q: number,
    k: number,
    v: number,
    first: number,
    bounds: number,
    numHeads: number,
    numKVHeads: number,
    headDim: number,
    scale: number,
    scratch: number,
    scratchStride: number,
    itemStart: number,
    itemEnd: number,
    itemStep: number,
  ): void;
}

/** Int32 slots of the control block. */
export const Slot = {
  /**
   * The job ticket: (job counter << 8) | threads taking part (main included).
   * One word, so a worker reads which job is current and whether it takes part
   * at once; workers at or past that count sit the job out and read nothing else
   * (the main thread may already be writing the next job's arguments).
   */
  GENERATION: 0,
  PENDING: 1,
  QUIT: 2,
  FAILED: 3,
  OP: 4,
  /**
   * Batched MATMUL and GATED jobs: the next unclaimed row. Threads claim rows
   * in chunks from it (Atomics.add) until none are left, so a thread that
   * starts late or runs slow takes fewer; the main thread zeroes it per job.
   */
  CURSOR: 5,
  /** First of the job's arguments. */
  ARGS: 8,
} as const;

export const CONTROL_INTS = 64;
export const CONTROL_BYTES = CONTROL_INTS * 4;

/**
 * A job's arguments for WorkerPool.run, written in order into one reused
 * buffer: the host halves make a kernel call per step of a decode, and an
 * argument array per call was most of what a token allocated.
 */
export class JobArgs {
  readonly values = new Int32Array(CONTROL_INTS - Slot.ARGS);
  length = 0;

  /** Starts the next job's arguments. */
  clear(): this {
    this.length = 0;
    return this;
  }

  /** Appends one argument (an int32, or an address, which the kernels read as unsigned). */
  add(value: number): this {
    if (this.length === this.values.length) throw new Error(`a kernel job takes at most ${this.values.length} arguments`);
    this.values[this.length++] = value;
    return this;
  }
}

/** Matrices one MATMUL job can carry (the control block's size bounds it). */
export const MAX_MATRICES = 8;

export const Op = {
  /**
   * Several matrices with one input. args: cols, x, xq, xd, xs, xb, batch,
   * scratch, scratchStride, count, then type, out, w, rows per matrix. The
   * matrices' rows, end to end, are split across threads; thread i's decode
   * scratch is at scratch + i * scratchStride.
   */
  MATMUL: 1,
  /**
   * args: out, q, keys, values, positions, seqIds, numHeads, numKVHeads, headDim,
   * slotLength, scale (float bits), window, softcap (float bits), scores, scoresStride,
   * items, kvEncoding (0 f32, 1 f16, 2 Q8_0; see KVBuffer), partials, chunks — items (token x KV
   * head x chunk of positions, each with the query heads that share the KV head) split across
   * threads; thread i's scratch at scores + i * scoresStride; chunks past a token's first write
   * partial records, merged by attentionCombine after the job.
   */
  ATTENTION: 2,
  /**
   * The gated MLP's middle. args: as MATMUL with count 2 (gate, writing its
   * [batch, rows] products to out; up, whose "out" is the first of the threads'
   * tiles), then out, the activation (0 SiLU, 1 GELU-tanh) and the bytes from
   * one thread's tile to the next. Each thread computes its rows of both,
   * gatedTileRows at a time, and act(gate) * up for them into out.
   */
  GATED: 3,
  /**
   * Kernels.prepareMatrix's interleave (assembly/interleave.ts), in place. args: type, w, rows,
   * cols, scratch, scratchStride; the groups of four rows are split across threads, thread i's
   * copy of a group at scratch + i * scratchStride.
   */
  INTERLEAVE: 4,
  /**
   * Training's attention forward (assembly/train-attention.ts). args: out, lse, q, k, v, first,
   * numHeads, numKVHeads, headDim, scale (float bits), scratch, scratchStride, items — items
   * (token x KV head) interleaved across threads, thread i's scores at scratch + i * scratchStride.
   */
  TRAIN_ATTENTION_FORWARD: 5,
  /**
   * Training's attention backward. args: dq, dk, dv, dOut, lse, q, k, v, first, bounds,
   * numHeads, numKVHeads, headDim, scale (float bits), scratch, scratchStride, items — items
   * (sequence x KV head, each owning its keys' and values' gradient rows) interleaved across threads.
   */
  TRAIN_ATTENTION_BACKWARD: 6,
  /**
   * Kernels.dequantizeTransposed (assembly/index.ts). args: type, w, rows, cols, colFrom,
   * colCount, out, rowFrom, rowCount, scratch, scratchStride: the panel's rows split across
   * threads in tiles of four, thread i's decoded rows at scratch + i * scratchStride.
   */
  DEQUANTIZE_TRANSPOSED: 7,
  /**
   * Training's cross-entropy (assembly/train-loss.ts). args: logits, targets, losses, rows, vocab,
   * gradScale (float bits), gradient (0 or 1) — the rows split across threads in contiguous shares.
   */
  CROSS_ENTROPY: 8,
  /**
   * Training's transposed block of a float weight (assembly/transpose.ts). args: src, cols, from,
   * count, dst, rows, size (element bytes) — the source rows split across threads in groups of four.
   */
  TRANSPOSE: 9,
  /**
   * Kernels.gemm (assembly/gemm.ts). args: c, cRow, a, aRow, aStep, b, bRow, bTransposed, m, n,
   * k, accumulate, scratch, scratchStride, mChunk, nChunk — c's [mChunk, nChunk] tiles claimed
   * from Slot.CURSOR, thread i's packing scratch at scratch + i * scratchStride.
   */
  GEMM: 10,
} as const;

const floatScratch = new Float32Array(1);
const floatBitsScratch = new Int32Array(floatScratch.buffer);

/** A float32 as the int32 with the same bits, to pass through the int32 control block. */
export function floatToBits(value: number): number {
  floatScratch[0] = value;
  return floatBitsScratch[0]!;
}

export function bitsToFloat(bits: number): number {
  floatBitsScratch[0] = bits;
  return floatScratch[0]!;
}

/** What a worker receives as workerData. */
export interface WorkerSetup {
  module: WasmModule;
  memory: WasmMemory;
  controlAddress: number;
  threadIndex: number;
}

/**
 * Polls of the control block before sleeping in Atomics.wait: long enough to
 * bridge the main thread's work between two kernel calls of a decode step
 * (norms, RoPE, sampling), so workers stay awake for a whole forward pass;
 * waking a sleeping thread costs more than polling. Far fewer polls let workers
 * fall asleep mid-token, which slows decoding; far more also bridge V8's
 * compile-time gaps after load, but then an idle pool burns a core after each
 * burst of work, which costs more than it saves wherever cores are shared
 * (other processes, the test suite). Between those, decode speed is flat.
 */
export const SPIN_LIMIT = 20000;

/** Thread `index` of `threads` runs rows [start, end) of `rows`: contiguous, as even as can be. */
export function shareOf(rows: number, index: number, threads: number): [number, number] {
  return [shareStart(rows, index, threads), shareStart(rows, index + 1, threads)];
}

/** The first row of thread `index`'s share (`shareOf`), and the end of thread `index - 1`'s. */
function shareStart(rows: number, index: number, threads: number): number {
  return Math.floor((rows * index) / threads);
}

export const MAX_THREADS = 255;

export function ticketThreads(ticket: number): number {
  return ticket & 0xff;
}

export function nextTicket(ticket: number, threads: number): number {
  return ((((ticket >>> 8) + 1) & 0xffffff) << 8) | threads;
}

/** Rows [from, to) of matrix m of a MATMUL-shaped job, on thread `index`'s decode scratch. */
function matmulRows(
  exports: KernelExports,
  control: Int32Array,
  index: number,
  m: number,
  from: number,
  to: number,
  out = (control[Slot.ARGS + 11 + 4 * m]! >>> 0) + from * 4,
  outStride = control[Slot.ARGS + 13 + 4 * m]!,
): void {
  const a = Slot.ARGS;
  const at = a + 10 + 4 * m;
  exports.matmul(
    control[at]!,
    out,
    control[at + 2]! >>> 0,
    control[at + 3]!,
    control[a]!,
    control[a + 1]! >>> 0,
    control[a + 2]! >>> 0,
    control[a + 3]! >>> 0,
    control[a + 4]! >>> 0,
    control[a + 5]! >>> 0,
    control[a + 6]!,
    (control[a + 7]! >>> 0) + index * control[a + 8]!,
    from,
    to,
    outStride,
  );
}

/**
 * Rows each claim of a batched job takes: about sixteen claims per thread, so
 * the wait for the last one is short, in multiples of four (matmul's tiles).
 */
function claimRows(total: number, threads: number): number {
  return Math.max(4, Math.floor(total / (threads * 16)) & ~3);
}

/** Rows [start, end) of a job (of the matrices' rows end to end) on thread `index`. */
type RowsWork = (exports: KernelExports, control: Int32Array, index: number, start: number, end: number) => void;

/**
 * Calls `work` on this thread's rows of `total`: for a batch (prefill),
 * chunks claimed from Slot.CURSOR while any are left, since there each chunk is
 * long and threads on shared cores run at uneven speeds; for one activation row
 * (decode), the contiguous share `shareOf` gives, as there a job is short and
 * an atomic claim per chunk costs more than uneven shares do. (`work` is a plain
 * function of the control block, not a closure: a decode step makes several of
 * these calls per layer, and nothing in them allocates.)
 */
function forEachShare(exports: KernelExports, control: Int32Array, index: number, threads: number, total: number, work: RowsWork): void {
  if (threads > 1 && control[Slot.ARGS + 6]! > 1) {
    const chunk = claimRows(total, threads);
    for (let start = Atomics.add(control, Slot.CURSOR, chunk); start < total; start = Atomics.add(control, Slot.CURSOR, chunk)) {
      work(exports, control, index, start, Math.min(total, start + chunk));
    }
    return;
  }
  const start = shareStart(total, index, threads);
  const end = shareStart(total, index + 1, threads);
  if (start < end) work(exports, control, index, start, end);
}

/** MATMUL: rows [start, end) of the job's matrices taken end to end. */
function matmulJoinedRows(exports: KernelExports, control: Int32Array, index: number, start: number, end: number): void {
  const a = Slot.ARGS;
  const count = control[a + 9]!;
  let first = 0; // first row of matrix m in the joined rows
  for (let m = 0; m < count && first < end; m++) {
    const rows = control[a + 13 + 4 * m]!;
    const from = Math.max(start, first) - first;
    const to = Math.min(end, first + rows) - first;
    if (from < to) matmulRows(exports, control, index, m, from, to);
    first += rows;
  }
}

/** Floats of one thread's tile of up products in a GATED job: 64 KiB, which stays in its core's L2 cache. */
const GATED_TILE_FLOATS = 16384;

/** Rows of gate and up a thread computes at a time in a GATED job over `batch` activation rows (a multiple of four). */
export function gatedTileRows(batch: number): number {
  return Math.max(4, Math.floor(GATED_TILE_FLOATS / batch) & ~3);
}

/**
 * GATED: rows [start, end) of gate and up, gatedTileRows at a time: the gate's
 * products go to out, the up products to this thread's tile, and the
 * activation combines them in out while the tile is in cache. (A [batch, rows]
 * buffer for all of up would cost 2.4 MiB for a 128-token chunk of Qwen2.5.)
 */
function gatedRows(exports: KernelExports, control: Int32Array, index: number, start: number, end: number): void {
  const a = Slot.ARGS;
  const batch = control[a + 6]!;
  const step = gatedTileRows(batch);
  const tile = (control[a + 15]! >>> 0) + index * control[a + 20]!;
  for (let from = start; from < end; from += step) {
    const to = Math.min(end, from + step);
    matmulRows(exports, control, index, 0, from, to);
    matmulRows(exports, control, index, 1, from, to, tile, step);
    exports.gatedActivation(control[a + 18]! >>> 0, control[a + 11]! >>> 0, tile, control[a + 13]!, batch, from, to, control[a + 19]!, step);
  }
}

/**
 * GEMM: tiles of [mChunk, nChunk] of c claimed one at a time (each a product of its own,
 * sharing nothing with the others but the operands read), n's tiles inner so that the threads
 * work on the same rows of a at once.
 */
function gemmTiles(exports: KernelExports, control: Int32Array, index: number): void {
  const u = (i: number) => control[Slot.ARGS + i]! >>> 0;
  const [c, cRow, a, aRow, aStep, b, bRow, bTransposed, m, n, k, accumulate] = [u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10), u(11)];
  const scratch = u(12) + index * u(13);
  const [mChunk, nChunk] = [u(14), u(15)];
  const nTiles = Math.ceil(n / nChunk);
  const tiles = Math.ceil(m / mChunk) * nTiles;
  for (let t = Atomics.add(control, Slot.CURSOR, 1); t < tiles; t = Atomics.add(control, Slot.CURSOR, 1)) {
    const i = Math.floor(t / nTiles) * mChunk;
    const j = (t % nTiles) * nChunk;
    exports.gemm(c + i * cRow + j * 4, cRow, a + i * aRow, aRow, aStep, bTransposed ? b + j * bRow : b + j * 4, bRow, bTransposed, Math.min(mChunk, m - i), Math.min(nChunk, n - j), k, accumulate, scratch);
  }
}

/** Runs thread `index`'s share (of `threads`) of the job in the control block. */
export function runShare(exports: KernelExports, control: Int32Array, index: number, threads: number): void {
  const a = Slot.ARGS;
  switch (control[Slot.OP]) {
    case Op.MATMUL: {
      const count = control[a + 9]!;
      let total = 0;
      for (let m = 0; m < count; m++) total += control[a + 13 + 4 * m]!;
      forEachShare(exports, control, index, threads, total, matmulJoinedRows);
      return;
    }
    case Op.GATED:
      forEachShare(exports, control, index, threads, control[a + 13]!, gatedRows);
      return;
    case Op.ATTENTION: {
      // Items interleaved across threads (index, index + threads, ...): causal
      // attention's later tokens read more positions, so contiguous shares would not balance.
      const items = control[a + 15]!;
      if (index >= items) return;
      exports.attention(
        control[a]! >>> 0,
        control[a + 1]! >>> 0,
        control[a + 2]! >>> 0,
        control[a + 3]! >>> 0,
        control[a + 4]! >>> 0,
        control[a + 5]! >>> 0,
        control[a + 6]!,
        control[a + 7]!,
        control[a + 8]!,
        control[a + 9]!,
        bitsToFloat(control[a + 10]!),
        control[a + 11]!,
        bitsToFloat(control[a + 12]!),
        (control[a + 13]! >>> 0) + index * control[a + 14]!,
        index,
        items,
        threads,
        control[a + 16]!,
        control[a + 17]! >>> 0,
        control[a + 18]!,
      );
      return;
    }
    case Op.TRAIN_ATTENTION_FORWARD: {
      const items = control[a + 12]!;
      if (index >= items) return;
      const u = (i: number) => control[a + i]! >>> 0;
      exports.trainAttentionForward(u(0), u(1), u(2), u(3), u(4), u(5), control[a + 6]!, control[a + 7]!, control[a + 8]!, bitsToFloat(control[a + 9]!), u(10) + index * control[a + 11]!, index, items, threads);
      return;
    }
    case Op.TRAIN_ATTENTION_BACKWARD: {
      const items = control[a + 16]!;
      if (index >= items) return;
      const u = (i: number) => control[a + i]! >>> 0;
      const scratchStride = control[a + 15]!;
      exports.trainAttentionBackward(
        u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9),
        control[a + 10]!, control[a + 11]!, control[a + 12]!, bitsToFloat(control[a + 13]!),
        u(14) + index * scratchStride, scratchStride, index, items, threads,
      );
      return;
    }
    case Op.CROSS_ENTROPY: {
      const [start, end] = shareOf(control[a + 3]!, index, threads);
      if (start < end) exports.crossEntropyRows(control[a]! >>> 0, control[a + 1]! >>> 0, control[a + 2]! >>> 0, control[a + 4]!, bitsToFloat(control[a + 5]!), control[a + 6]!, start, end);
      return;
    }
    case Op.TRANSPOSE: {
      const rows = control[a + 5]!;
      const [first, end] = shareOf(Math.ceil(rows / 4), index, threads);
      if (first < end) exports.transposeColumns(control[a]! >>> 0, control[a + 1]!, control[a + 2]!, control[a + 3]!, control[a + 4]! >>> 0, rows, control[a + 6]!, 4 * first, Math.min(rows, 4 * end));
      return;
    }
    case Op.GEMM: {
      gemmTiles(exports, control, index);
      return;
    }
    case Op.INTERLEAVE: {
      const [type, w, rows, cols, scratch, scratchStride] = [control[a]!, control[a + 1]! >>> 0, control[a + 2]!, control[a + 3]!, control[a + 4]! >>> 0, control[a + 5]!];
      const [first, end] = shareOf(Math.floor(rows / 4), index, threads);
      if (first === end) return;
      const groupBytes = 4 * exports.rowBytes(type, cols);
      exports.interleave(type, w + first * groupBytes, (end - first) * 4, cols, scratch + index * scratchStride);
      return;
    }
    case Op.DEQUANTIZE_TRANSPOSED: {
      const rowFrom = control[a + 7]!;
      const rowCount = control[a + 8]!;
      const [first, end] = shareOf(Math.ceil(rowCount / 4), index, threads);
      if (first === end) return;
      const start = rowFrom + first * 4;
      const u = (i: number) => control[a + i]! >>> 0;
      exports.dequantizeTransposed(
        control[a]!, u(1), control[a + 2]!, control[a + 3]!, control[a + 4]!, control[a + 5]!,
        u(6) + first * 16, rowCount, start, Math.min(rowFrom + rowCount, rowFrom + end * 4), u(9) + index * control[a + 10]!,
      );
      return;
    }
    default:
      throw new Error(`unknown kernel op ${control[Slot.OP]}`);
  }
}
