/**
 * The training forward and backward of a llama-family model (llama, qwen2,
 * qwen3, and Gemma 3 with its post-norms): the forward keeps each block's activations, the backward walks
 * them in reverse and adds the LoRA gradients. Base weights are frozen in
 * their stored encoding; only the adapters get gradients.
 */
import { Rng } from "@infer/core";
import type { Kernels, WeightMatrix } from "../kernels/types.js";
import { embeddingLookup } from "../kernels/dequant.js";
import { applyRope } from "../kernels/ops.js";
import type { ModelConfig } from "../engine/config.js";
import type { LlamaBlockWeights } from "../engine/block-weights.js";
import type { LoadedModel } from "../engine/transformer.js";
import { attentionBackward, attentionForward, type AttentionSaved, type AttentionShape } from "./ops/attention.js";
import { crossEntropy } from "./ops/cross-entropy.js";
import { gatedBackward, gatedForward } from "./ops/gated-activation.js";
import { frozenLinearBackward, frozenLinearForward } from "./ops/linear.js";
import { rmsNormBackward, rmsNormForward } from "./ops/rms-norm.js";
import { ropeBackward } from "./ops/rope.js";
import { vocabularyBackward, vocabularyForward } from "./ops/vocabulary-projection.js";
import type { LoraLinear } from "./lora-linear.js";
import { like, workspaceOf } from "./ops/buffers.js";

/** Examples packed one after another, each its own causal sequence. */
export interface PackedBatch {
  /** [n] */
  tokens: Int32Array;
  /** [n] position within its example */
  positions: Int32Array;
  /** [n] index of its example's first token */
  sequenceStart: Int32Array;
  /** [n] the token row t predicts (the example's next token), −1 where none is counted */
  targets: Int32Array;
}

/** The linears of a block that can carry an adapter, by their field in LlamaBlockWeights. */
export type AdaptedLinear = "q" | "k" | "v" | "o" | "gate" | "up" | "down";

export interface TrainingGraph {
  config: ModelConfig;
  kernels: Kernels;
  head: Pick<LoadedModel, "embedding" | "outputNorm" | "output">;
  blocks: readonly LlamaBlockWeights[];
  /** Per block, its inverse RoPE frequencies. */
  ropeFrequencies: readonly Float64Array[];
  /** Per block, the adapters on its linears. */
  adapters: readonly Partial<Record<AdaptedLinear, LoraLinear>>[];
  /** LoRA dropout rate in training (0 = none). */
  dropout: number;
  /** Seeds each call's dropout masks. */
  rng: Rng;
  /**
   * Gradient checkpointing: keep only a block's input in the forward and
   * recompute its activations in the backward, for a second forward's time.
   * true: every block (memory for one block's activations instead of all);
   * a number: blocks keep their activations while those of all blocks so far
   * fit in that many bytes, the later ones are recomputed; a function: that
   * number, given the bytes every block would keep (the first block's times the
   * blocks: a model's blocks keep alike); false or absent: none.
   */
  checkpoint?: boolean | number | ((allBlocksBytes: number) => number);
  /** Rows of the head's logits computed at once (tests); default: as many as fit a fixed budget of logits. */
  headChunkRows?: number;
  /** Run in float64 (gradient checks; the reference kernels only). */
  float64?: boolean;
}

/**
 * What one block's forward keeps for its backward. The normed inputs of the
 * linears and the attention's and MLP's outputs are not kept: the frozen
 * linears' backward needs none of them (the adapters keep the inputs they read).
 */
interface BlockTape {
  x: Float32Array;
  inv1: Float64Array;
  /** q and k before their per-head norms (qwen3), and those norms' 1 / rms. */
  qRaw?: Float32Array;
  kRaw?: Float32Array;
  invQ?: Float64Array;
  invK?: Float64Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  weights: AttentionSaved;
  /** The attention's output projection and its post-norm's 1 / rms (Gemma 3's post-norm only). */
  o?: Float32Array;
  invO?: Float64Array;
  x1: Float32Array;
  inv2: Float64Array;
  gate: Float32Array;
  up: Float32Array;
  /** The MLP's output and its post-norm's 1 / rms (Gemma 3's post-norm only). */
  down?: Float32Array;
  invDown?: Float64Array;
}

/** The loss summed over counted targets, and their count. */
export interface LossSum {
  sum: number;
  count: number;
}

/**
 * Runs the batch forward and returns its loss; with `backward`, adds the
 * gradients of the mean loss (the sum / count) to every adapter's gradA/gradB.
 */
export function lossAndGradients(graph: TrainingGraph, batch: PackedBatch, backward: boolean): LossSum {
  const { config, head } = graph;
  const n = batch.tokens.length;
  const hidden = config.hiddenSize;
  const x = new (graph.float64 ? Float64Array : Float32Array)(n * hidden) as Float32Array;
  embeddingLookup(x, head.embedding, batch.tokens, config.embeddingScale);
  // Each block draws its dropout masks from its own generator, seeded per call, so a recomputed block draws the same.
  const callSeed = graph.rng.nextUint32();
  const blockRng = (i: number) => new Rng(callSeed * MAX_BLOCKS + i);
  /** Per block, its activations, or (checkpointing) only its input. */
  const tapes: (BlockTape | Float32Array)[] = [];
  let stream: Float32Array = x;
  let budget = graph.checkpoint === true ? 0 : graph.checkpoint === false || graph.checkpoint === undefined ? Infinity : graph.checkpoint;
  let keptBytes = 0;
  /** The first block's kept bytes, which stand for every block's (a model's blocks keep alike). */
  let blockBytes: number | undefined;
  graph.blocks.forEach((block, i) => {
    const rng = blockRng(i);
    // Whether a block may keep its activations is known before its forward (from the first block's size):
    // one that may holds its largest arrays in buffers of its own, reused step after step; the others
    // share one set, free again once their forward (or, recomputed, their backward) is done.
    const mayKeep = blockBytes === undefined ? budget !== 0 : keptBytes + blockBytes <= (budget as number);
    const { tape, mixed } = blockForward(graph, i, block, stream, batch, rng, mayKeep);
    const input = stream;
    stream = blockOutput(tape, mixed, graph, i, block, n, rng);
    const bytes = tapeBytes(tape, graph.adapters[i]);
    if (blockBytes === undefined) {
      blockBytes = bytes;
      if (typeof budget === "function") budget = budget(bytes * graph.blocks.length);
    }
    if (mayKeep && keptBytes + bytes <= (budget as number)) {
      keptBytes += bytes;
      tapes.push(tape);
    } else {
      tapes.push(input);
      // The adapters' own tapes hold their inputs (this block's activations) until the recompute replaces them.
      for (const adapter of Object.values(graph.adapters[i] ?? {})) adapter.discardTape();
    }
  });

  // The head over the rows that predict a counted target.
  const rows: number[] = [];
  for (let t = 0; t < n; t++) if (batch.targets[t]! >= 0) rows.push(t);
  const m = rows.length;
  const selected = like(x, m * hidden);
  rows.forEach((t, r) => selected.set(stream.subarray(t * hidden, (t + 1) * hidden), r * hidden));
  const targets = Int32Array.from(rows, (t) => batch.targets[t]!);
  const output = headLoss(graph, selected, targets, backward);
  if (!backward || m === 0) return { sum: output.sum, count: m };
  const dSelected = output.dSelected!;
  let dx: Float32Array = like(x, n * hidden);
  rows.forEach((t, r) => dx.set(dSelected.subarray(r * hidden, (r + 1) * hidden), t * hidden));
  for (let i = graph.blocks.length - 1; i >= 0; i--) {
    const block = graph.blocks[i]!;
    let tape = tapes[i]!;
    if (!isTape(tape)) {
      // The block again from its input, with its generator restarted: the same activations and dropout masks.
      const rng = blockRng(i);
      const again = blockForward(graph, i, block, tape, batch, rng);
      blockOutput(again.tape, again.mixed, graph, i, block, n, rng);
      tape = again.tape;
    }
    dx = blockBackward(graph, i, block, tape, dx, batch);
    tapes.length = i; // this block's activations can go
  }
  return { sum: output.sum, count: m };
}

/** Logits the head computes at once (float32 values): the full [rows, vocab] logits never exist. */
const HEAD_CHUNK_LOGITS = 1 << 24;

/**
 * The output norm, vocabulary projection and cross-entropy of the selected
 * rows [m, hidden], each predicting its target: the summed loss, and with
 * `backward` the gradient of the mean loss for the rows. Runs a chunk of rows
 * at a time, the chunk's logits overwritten by their gradient, so the head
 * holds one chunk's logits instead of all (for a large vocabulary, more than
 * the rest of a step); each row's values are those of one pass over all rows.
 */
function headLoss(graph: TrainingGraph, selected: Float32Array, targets: Int32Array, backward: boolean): { sum: number; dSelected?: Float32Array } {
  const { config, head, kernels } = graph;
  const { hiddenSize: hidden, vocabSize: vocab } = config;
  const m = targets.length;
  const normed = like(selected, m * hidden);
  const invOut = rmsNormForward(normed, selected, head.outputNorm, m, hidden, config.rmsEps, config.normUnitOffset);
  const chunk = Math.max(1, Math.min(m, graph.headChunkRows ?? Math.floor(HEAD_CHUNK_LOGITS / vocab)));
  const logits = selected.constructor === Float32Array ? workspaceOf(kernels).floats("head-logits", chunk * vocab) : like(selected, chunk * vocab);
  const dNormed = backward ? like(selected, m * hidden) : undefined;
  let sum = 0;
  for (let from = 0; from < m; from += chunk) {
    const count = Math.min(chunk, m - from);
    const rows = normed.subarray(from * hidden, (from + count) * hidden);
    vocabularyForward(kernels, logits, head.output, rows, count);
    sum = crossEntropy(logits, targets.subarray(from, from + count), count, vocab, dNormed && logits, 1 / m, sum, kernels);
    if (dNormed) vocabularyBackward(kernels, dNormed.subarray(from * hidden, (from + count) * hidden), head.output, logits, count);
  }
  if (!dNormed) return { sum };
  const dSelected = like(selected, m * hidden);
  rmsNormBackward(dSelected, dNormed, selected, head.outputNorm, invOut, m, hidden, config.normUnitOffset);
  return { sum, dSelected };
}

/** Blocks per model the dropout seeding leaves room for (far more than any decoder has). */
const MAX_BLOCKS = 4096;

/**
 * Bytes a block keeps for its backward beyond its input (which the previous
 * block's output holds anyway): its tape's arrays and its adapters', each
 * array once (the adapters of q, k and v share their input).
 */
function tapeBytes(tape: BlockTape, adapters: Partial<Record<AdaptedLinear, LoraLinear>> | undefined): number {
  const arrays = new Set<ArrayBufferView>();
  for (const value of [...Object.values(tape), ...Object.values(tape.weights)]) {
    if (ArrayBuffer.isView(value) && value !== tape.x) arrays.add(value);
  }
  for (const adapter of Object.values(adapters ?? {})) for (const array of adapter.keptArrays()) arrays.add(array);
  let bytes = 0;
  for (const array of arrays) bytes += array.byteLength;
  return bytes;
}

/**
 * A zeroed float32 buffer of the graph's workspace under `name`, for values used only until the next
 * request under that name: a block's transient activations and gradients would otherwise be tens of MiB
 * of garbage per block, most of a step's peak beyond the kept activations. `like` in float64 runs.
 */
function scratch(graph: TrainingGraph, name: string, x: Float32Array, length: number): Float32Array {
  if (x.constructor !== Float32Array) return like(x, length);
  return workspaceOf(graph.kernels).floats(name, length).fill(0);
}

/** A linear's input: an array of its own when an adapter keeps it for the backward, else scratch. */
function linearInput(graph: TrainingGraph, kept: boolean, name: string, x: Float32Array, length: number): Float32Array {
  return kept ? like(x, length) : scratch(graph, name, x, length);
}

function isTape(saved: BlockTape | Float32Array): saved is BlockTape {
  return !(saved instanceof Float32Array || saved instanceof Float64Array);
}

/** A frozen linear (+ bias) plus its adapter when it has one. */
function linearForward(
  graph: TrainingGraph,
  i: number,
  name: AdaptedLinear,
  w: WeightMatrix,
  x: Float32Array,
  n: number,
  rng: Rng,
  bias?: Float32Array,
  out = like(x, n * w.rows),
): Float32Array {
  frozenLinearForward(graph.kernels, out, w, x, n, bias);
  graph.adapters[i]?.[name]?.forward(out, x, n, graph.dropout, rng, graph.kernels);
  return out;
}

function linearBackward(graph: TrainingGraph, i: number, name: AdaptedLinear, w: WeightMatrix, dx: Float32Array, dy: Float32Array, n: number): void {
  frozenLinearBackward(dx, w, dy, n, graph.kernels);
  graph.adapters[i]?.[name]?.backward(dx, dy, n, graph.kernels);
}

function attentionShape(graph: TrainingGraph, i: number, batch: PackedBatch): AttentionShape {
  const { numHeads, numKVHeads, headDim, attentionScale, layerWindows } = graph.config;
  return {
    tokens: batch.tokens.length,
    numHeads,
    numKVHeads,
    headDim,
    sequenceStart: batch.sequenceStart,
    scale: attentionScale,
    window: layerWindows[i]!,
  };
}

/**
 * The block's forward up to the MLP's gated activation: its tape, and that activation (the down
 * projection's input). The MLP's gate and up projections, most of what a block keeps, go to workspace
 * buffers: arrays of the block's own when it may keep them (`ownBuffers`), reused step after step (a
 * fresh array's first touch costs about what its matmul does), else scratch that blocks share.
 */
function blockForward(
  graph: TrainingGraph,
  i: number,
  block: LlamaBlockWeights,
  x: Float32Array,
  batch: PackedBatch,
  rng: Rng,
  ownBuffers = false,
): { tape: BlockTape; mixed: Float32Array } {
  const { config } = graph;
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, rmsEps, normUnitOffset, ropeMode } = config;
  const n = batch.tokens.length;
  const h1 = like(x, n * hidden);
  const inv1 = rmsNormForward(h1, x, block.attnNorm, n, hidden, rmsEps, normUnitOffset);
  const qRaw = linearForward(graph, i, "q", block.q, h1, n, rng, block.qBias);
  const kRaw = linearForward(graph, i, "k", block.k, h1, n, rng, block.kBias);
  const v = linearForward(graph, i, "v", block.v, h1, n, rng, block.vBias);
  let q = qRaw;
  let k = kRaw;
  let invQ: Float64Array | undefined;
  let invK: Float64Array | undefined;
  if (block.qNorm) {
    q = like(x, qRaw.length);
    invQ = rmsNormForward(q, qRaw, block.qNorm, n * numHeads, headDim, rmsEps, normUnitOffset);
  } else q = qRaw; // roped in place: the raw values are kept only for a QK-norm's backward
  if (block.kNorm) {
    k = like(x, kRaw.length);
    invK = rmsNormForward(k, kRaw, block.kNorm, n * numKVHeads, headDim, rmsEps, normUnitOffset);
  } else k = kRaw;
  const frequencies = graph.ropeFrequencies[i]!;
  applyRope(q, n, numHeads, headDim, batch.positions, frequencies, ropeMode);
  applyRope(k, n, numKVHeads, headDim, batch.positions, frequencies, ropeMode);
  // The inputs of o, gate and up are kept only by their adapters; otherwise they are scratch.
  const adapters = graph.adapters[i];
  const attended = linearInput(graph, adapters?.o !== undefined, "attended", x, n * numHeads * headDim);
  const weights = attentionForward(attended, q, k, v, attentionShape(graph, i, batch), graph.kernels);
  const o = linearForward(graph, i, "o", block.o, attended, n, rng, block.oBias);
  const post = postNorm(o, block.postAttentionNorm, config, n);
  // Without a post-norm the projection's output is needed no further: the residual sum goes over it.
  const x1 = block.postAttentionNorm ? like(x, n * hidden) : o;
  for (let j = 0; j < x1.length; j++) x1[j] = x[j]! + post.out[j]!;
  const h2 = linearInput(graph, adapters?.gate !== undefined || adapters?.up !== undefined, "h2", x, n * hidden);
  const inv2 = rmsNormForward(h2, x1, block.ffnNorm, n, hidden, rmsEps, normUnitOffset);
  const length = n * block.gate.rows;
  // Overwritten whole by the projection: the block's own arrays are not zeroed first.
  const buffer = (name: string) =>
    ownBuffers && x.constructor === Float32Array ? workspaceOf(graph.kernels).array(`block-${i}-${name}`, length) : scratch(graph, name, x, length);
  const gate = linearForward(graph, i, "gate", block.gate, h2, n, rng, undefined, buffer("gate"));
  const up = linearForward(graph, i, "up", block.up, h2, n, rng, undefined, buffer("up"));
  const mixed = linearInput(graph, adapters?.down !== undefined, "mixed", x, gate.length);
  gatedForward(mixed, gate, up, gate.length, config.activation, graph.kernels);
  const tape: BlockTape = {
    x,
    inv1,
    qRaw: block.qNorm ? qRaw : undefined,
    kRaw: block.kNorm ? kRaw : undefined,
    invQ,
    invK,
    q,
    k,
    v,
    weights,
    o: block.postAttentionNorm ? o : undefined,
    invO: post.inverse,
    x1,
    inv2,
    gate,
    up,
  };
  return { tape, mixed };
}

/** y normed by a post-norm when the block has one (kept with its 1 / rms), else y itself. */
function postNorm(y: Float32Array, weight: Float32Array | undefined, config: ModelConfig, n: number): { out: Float32Array; inverse?: Float64Array } {
  if (!weight) return { out: y };
  const out = like(y, y.length);
  const inverse = rmsNormForward(out, y, weight, n, config.hiddenSize, config.rmsEps, config.normUnitOffset);
  return { out, inverse };
}

/** The gradient of a post-norm's input from its output's (dy itself without a post-norm). */
function postNormBackward(dy: Float32Array, y: Float32Array | undefined, weight: Float32Array | undefined, inverse: Float64Array | undefined, config: ModelConfig, n: number): Float32Array {
  if (!weight) return dy;
  const dx = like(dy, dy.length);
  rmsNormBackward(dx, dy, y!, weight, inverse!, n, config.hiddenSize, config.normUnitOffset);
  return dx;
}

/** The block's output x1 + (post-normed) down(mixed); the down projection's output is kept only for a post-norm. */
function blockOutput(tape: BlockTape, mixed: Float32Array, graph: TrainingGraph, i: number, block: LlamaBlockWeights, n: number, rng: Rng): Float32Array {
  const down = linearForward(graph, i, "down", block.down, mixed, n, rng);
  const post = postNorm(down, block.postFfnNorm, graph.config, n);
  if (block.postFfnNorm) {
    tape.down = down;
    tape.invDown = post.inverse;
  }
  const out = block.postFfnNorm ? like(down, down.length) : down;
  for (let j = 0; j < out.length; j++) out[j] = post.out[j]! + tape.x1[j]!;
  return out;
}

/** Given the gradient of the block's output, returns that of its input (and adds the adapters' gradients). */
function blockBackward(graph: TrainingGraph, i: number, block: LlamaBlockWeights, tape: BlockTape, dOut: Float32Array, batch: PackedBatch): Float32Array {
  const { config } = graph;
  const { hiddenSize: hidden, numHeads, numKVHeads, headDim, normUnitOffset, ropeMode } = config;
  const n = batch.tokens.length;
  // MLP: dx1 = dOut + the MLP's input gradient through the norm.
  // Gradients used only within this block's backward are scratch, reused block after block.
  const dMixed = scratch(graph, "d-mixed", dOut, tape.gate.length);
  const dDown = postNormBackward(dOut, tape.down, block.postFfnNorm, tape.invDown, config, n);
  linearBackward(graph, i, "down", block.down, dMixed, dDown, n);
  const dGate = scratch(graph, "d-gate", dOut, tape.gate.length);
  const dUp = scratch(graph, "d-up", dOut, tape.up.length);
  gatedBackward(dGate, dUp, dMixed, tape.gate, tape.up, tape.gate.length, config.activation, graph.kernels);
  const dH2 = scratch(graph, "d-h2", dOut, n * hidden);
  linearBackward(graph, i, "gate", block.gate, dH2, dGate, n);
  linearBackward(graph, i, "up", block.up, dH2, dUp, n);
  const dX1 = dOut.slice();
  rmsNormBackward(dX1, dH2, tape.x1, block.ffnNorm, tape.inv2, n, hidden, normUnitOffset);

  // Attention: dx = dx1 + the attention's input gradient through the norm.
  const dAttended = scratch(graph, "d-attended", dOut, n * numHeads * headDim);
  const dO = postNormBackward(dX1, tape.o, block.postAttentionNorm, tape.invO, config, n);
  linearBackward(graph, i, "o", block.o, dAttended, dO, n);
  const dq = scratch(graph, "d-q", dOut, tape.q.length);
  const dk = scratch(graph, "d-k", dOut, tape.k.length);
  const dv = scratch(graph, "d-v", dOut, tape.v.length);
  attentionBackward(dq, dk, dv, dAttended, tape.q, tape.k, tape.v, tape.weights, attentionShape(graph, i, batch), graph.kernels);
  ropeBackward(dq, n, numHeads, headDim, batch.positions, graph.ropeFrequencies[i]!, ropeMode);
  ropeBackward(dk, n, numKVHeads, headDim, batch.positions, graph.ropeFrequencies[i]!, ropeMode);
  const dqRaw = block.qNorm ? headNormBackward(dq, tape.qRaw!, block.qNorm, tape.invQ!, n * numHeads, headDim, normUnitOffset) : dq;
  const dkRaw = block.kNorm ? headNormBackward(dk, tape.kRaw!, block.kNorm, tape.invK!, n * numKVHeads, headDim, normUnitOffset) : dk;
  const dH1 = scratch(graph, "d-h1", dOut, n * hidden);
  linearBackward(graph, i, "q", block.q, dH1, dqRaw, n);
  linearBackward(graph, i, "k", block.k, dH1, dkRaw, n);
  linearBackward(graph, i, "v", block.v, dH1, dv, n);
  const dX = dX1;
  rmsNormBackward(dX, dH1, tape.x, block.attnNorm, tape.inv1, n, hidden, normUnitOffset);
  return dX;
}

function headNormBackward(dy: Float32Array, x: Float32Array, weight: Float32Array, inverse: Float64Array, rows: number, dim: number, unitOffset: number): Float32Array {
  const dx = like(dy, dy.length);
  rmsNormBackward(dx, dy, x, weight, inverse, rows, dim, unitOffset);
  return dx;
}
