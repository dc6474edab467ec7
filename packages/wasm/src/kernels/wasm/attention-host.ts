/**
 * The host half of attention: runs kernels.wasm's attention when the KV cache
 * (keys and values) lives in the arena (`allocate`); a cache elsewhere goes to
 * the reference attention, since copying a cache in on every call would cost
 * as much as reading it. Query heads of the batch are split across threads.
 */
import { InferenceError } from "@infer/core";
import type { AttentionParams } from "../types.js";
import { referenceAttention } from "../reference.js";
import type { Scratch } from "./arena.js";
import type { KernelContext } from "./context.js";
import { floatToBits, Op } from "./protocol.js";

export class AttentionHost {
  private readonly qStage: Scratch;
  private readonly outStage: Scratch;
  private readonly tokenStage: Scratch;
  private readonly scores: Scratch;

  constructor(private readonly ctx: KernelContext) {
    this.qStage = ctx.scratch();
    this.outStage = ctx.scratch();
    this.tokenStage = ctx.scratch();
    this.scores = ctx.scratch();
  }

  attention(out: Float32Array, q: Float32Array, keys: Float32Array, values: Float32Array, p: AttentionParams): void {
    const ctx = this.ctx;
    ctx.checkOpen();
    const arena = ctx.arena;
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

    const qAddress = ctx.floatsIn(q, tokens * width, this.qStage);
    const tokenAddress = this.tokenStage.ensure(tokens * 8);
    const tokenInts = new Int32Array(arena.heap.buffer, tokenAddress, tokens * 2); // [positions | seqIds]
    tokenInts.set(p.positions.subarray(0, tokens));
    tokenInts.set(p.seqIds.subarray(0, tokens), tokens);
    const outAddress = arena.addressOf(out) ?? this.outStage.ensure(tokens * width * 4);
    const scoresStride = slotLength * 8; // f64 per position
    const scores = this.scores.ensure(scoresStride * ctx.pool.threads);

    const work = visible * numHeads * headDim * 8; // bytes of keys and values read
    ctx.pool.run(
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
      ctx.threadsFor(work),
    );
    ctx.copyOut(out, outAddress, tokens * width);
    }
}
