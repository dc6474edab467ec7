/**
 * The host half of attention: runs kernels.wasm's attention, the batch's
 * (token, KV head) pairs split across threads, each with the query heads that
 * share its KV head. A KV cache in the arena (`allocate`) is read in place.
 * A cache elsewhere has the positions this call reads (per slot, the span
 * from the earliest visible to the latest position) copied into a staging
 * copy first: a plain copy at memory speed, much cheaper than the float64
 * reference attention it replaces, though reading in place is best. An f16 or
 * Q8_0 cache is read as such and decoded to f32 a block at a time in SIMD. A
 * token that sees more than 512 positions has them split into chunks that
 * threads take apart, merged after (attentionCombine).
 */
import { InferenceError } from "@infer/core";
import { kvBytes } from "../kv-codec.js";
import { kvEncodingOf, Q8_BLOCK, type AttentionParams, type KVBuffer } from "../types.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { floatToBits, JobArgs, Op } from "./protocol.js";

export class AttentionHost {
  private readonly qStage: Scratch;
  private readonly outStage: Scratch;
  private readonly tokenStage: Scratch;
  private readonly scores: Scratch;
  private readonly partials: Scratch;
  private readonly keyStage: Scratch;
  private readonly valueStage: Scratch;
  /** [slots * 2]: per cache slot, the first and last position this call reads (reused across calls). */
  private spans = new Int32Array(0);
  private readonly args = new JobArgs();

  constructor(private readonly ctx: KernelContext) {
    this.qStage = ctx.scratch();
    this.outStage = ctx.scratch();
    this.tokenStage = ctx.scratch();
    this.scores = ctx.scratch();
    this.partials = ctx.scratch();
    this.keyStage = ctx.scratch();
    this.valueStage = ctx.scratch();
  }

  attention(out: Float32Array, q: Float32Array, keys: KVBuffer, values: KVBuffer, p: AttentionParams): void {
    const ctx = this.ctx;
    ctx.checkOpen();
    const arena = ctx.arena;
    const { tokens, numHeads, numKVHeads, headDim, slotLength, window } = p;
    checkCount("tokens", tokens, 0);
    checkCount("numHeads", numHeads, 1);
    checkCount("numKVHeads", numKVHeads, 1);
    checkCount("headDim", headDim, 1);
    checkCount("slotLength", slotLength, 1);
    if (tokens === 0) return;
    const encoding = kvEncodingOf(keys);
    if (encoding !== kvEncodingOf(values)) {
      throw new InferenceError("INTERNAL", "attention: keys and values must share one encoding");
    }
    const encodingName = (["f32", "f16", "q8_0"] as const)[encoding];
    if (encodingName === "q8_0" && (numKVHeads * headDim) % Q8_BLOCK !== 0) {
      throw new InferenceError("INTERNAL", `attention: a q8_0 cache needs rows of a multiple of 32 elements, got ${numKVHeads * headDim}`);
    }
    if (numHeads % numKVHeads !== 0) {
      throw new InferenceError("INTERNAL", `attention: ${numHeads} query heads do not group over ${numKVHeads} KV heads`);
    }
    const width = numHeads * headDim; // floats per token in q and out
    const slotBytes = kvBytes(encodingName, slotLength * numKVHeads * headDim);
    const slots = Math.floor(Math.min(keys.byteLength, values.byteLength) / slotBytes);
    if (q.length < tokens * width || out.length < tokens * width) {
      throw new InferenceError("INTERNAL", `attention: q and out need ${tokens * width} floats`);
    }
    let visible = 0; // cached positions read, over all tokens
    let widest = 0; // most positions one token sees
    for (let t = 0; t < tokens; t++) {
      const position = p.positions[t]!;
      const seq = p.seqIds[t]!;
      if (!(position >= 0 && position < slotLength && seq >= 0 && seq < slots)) {
        throw new InferenceError(
          "INTERNAL",
          `attention: token ${t} at position ${position} of slot ${seq} is outside the cache (${slots} slots x ${slotLength})`,
        );
      }
      const seen = window > 0 ? Math.min(position + 1, window) : position + 1;
      visible += seen;
      widest = Math.max(widest, seen);
    }
    // Items: (token, KV head, chunk of positions); a token's chunks beyond the first leave partial records.
    const chunks = ctx.exports.attentionChunks(widest);

    const rowBytes = kvBytes(encodingName, numKVHeads * headDim); // per cached position
    const keysAddress = arena.addressOf(keys) ?? this.stageCache(keys, this.keyStage, p, slots, rowBytes);
    const valuesAddress = arena.addressOf(values) ?? this.stageCache(values, this.valueStage, p, slots, rowBytes);
    const qAddress = ctx.floatsIn(q, tokens * width, this.qStage);
    const tokenAddress = this.tokenStage.ensure(tokens * 8);
    const tokenInts = arena.heapInts; // [positions | seqIds] at tokenAddress
    for (let t = 0, at = tokenAddress >> 2; t < tokens; t++, at++) {
      tokenInts[at] = p.positions[t]!;
      tokenInts[at + tokens] = p.seqIds[t]!;
    }
    const outAddress = arena.addressOf(out) ?? this.outStage.ensure(tokens * width * 4);
    const scoresStride = Math.ceil(ctx.exports.attentionScratchBytes(slotLength, numHeads / numKVHeads, headDim, encoding) / 64) * 64;
    const scores = this.scores.ensure(scoresStride * ctx.pool.threads);

    // Bytes of keys and values the query heads consume (each group reads its KV head's from memory once).
    const work = Math.ceil((visible * numHeads * 2 * rowBytes) / numKVHeads);
    const args = this.args.clear().add(outAddress).add(qAddress).add(keysAddress).add(valuesAddress);
    args.add(tokenAddress).add(tokenAddress + tokens * 4).add(numHeads).add(numKVHeads).add(headDim).add(slotLength);
    args.add(floatToBits(p.scale)).add(window).add(floatToBits(p.softcap)).add(scores).add(scoresStride);
    const partials = chunks > 1 ? this.partials.ensure(tokens * numHeads * chunks * ctx.exports.attentionRecordBytes(headDim)) : 0;
    args.add(tokens * numKVHeads * chunks).add(encoding).add(partials).add(chunks);
    ctx.pool.run(Op.ATTENTION, args, ctx.threadsFor(work));
    if (chunks > 1) ctx.exports.attentionCombine(outAddress, partials, tokenAddress, tokens, numHeads, headDim, window, chunks);
    ctx.copyOut(out, outAddress, tokens * width);
  }

  /**
   * Copies the cached positions the batch reads from `cache` (a layer's keys or
   * values outside the arena) to the same offsets of a staging copy; returns its address.
   */
  private stageCache(cache: KVBuffer, stage: Scratch, p: AttentionParams, slots: number, rowBytes: number): number {
    const address = stage.ensure(slots * p.slotLength * rowBytes);
    if (this.spans.length < slots * 2) this.spans = new Int32Array(slots * 2);
    const spans = this.spans;
    spans.fill(-1, 0, slots * 2);
    for (let t = 0; t < p.tokens; t++) {
      const seq = p.seqIds[t]!;
      const position = p.positions[t]!;
      const first = p.window > 0 ? Math.max(0, position - p.window + 1) : 0;
      if (spans[2 * seq]! < 0 || first < spans[2 * seq]!) spans[2 * seq] = first;
      if (position > spans[2 * seq + 1]!) spans[2 * seq + 1] = position;
    }
    const staged = new Uint8Array(this.ctx.arena.heap.buffer, address, slots * p.slotLength * rowBytes);
    const bytes = new Uint8Array(cache.buffer, cache.byteOffset, cache.byteLength);
    for (let seq = 0; seq < slots; seq++) {
      if (spans[2 * seq]! < 0) continue;
      const from = (seq * p.slotLength + spans[2 * seq]!) * rowBytes;
      const to = (seq * p.slotLength + spans[2 * seq + 1]! + 1) * rowBytes;
      staged.set(bytes.subarray(from, to), from);
    }
    return address;
  }
}

function checkCount(name: string, value: number, least: number): void {
  if (!Number.isInteger(value) || value < least) {
    throw new InferenceError("INTERNAL", `attention: ${name} must be a ${least === 0 ? "non-negative" : "positive"} integer, got ${value}`);
  }
}
