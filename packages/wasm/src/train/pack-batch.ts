/**
 * A TrainBatch to the packed rows the training graph runs: examples one after
 * another, positions restarting at 0, and the Hugging Face `labels` targets
 * (row t predicts token t + 1 of its example unless lossMask drops it).
 */
import { InferenceError, type TrainBatch } from "@infer/core";
import type { PackedBatch } from "./llama-graph.js";

function invalid(message: string, details: Record<string, unknown>): InferenceError {
  return new InferenceError("INVALID_OPTION", message, { details: { option: "batch", ...details } });
}

export function packBatch(batch: TrainBatch, vocabSize: number): PackedBatch {
  const { inputIds, lossMask } = batch ?? {};
  if (!Array.isArray(inputIds) || inputIds.length === 0) throw invalid("batch.inputIds must hold at least one example", {});
  if (lossMask !== undefined && (!Array.isArray(lossMask) || lossMask.length !== inputIds.length)) {
    throw invalid(`batch.lossMask must hold one mask per example (${inputIds.length})`, { field: "lossMask" });
  }
  let n = 0;
  inputIds.forEach((ids, e) => {
    if (!Array.isArray(ids) || ids.length === 0) throw invalid(`batch.inputIds[${e}] must be a non-empty array of token ids`, { example: e });
    const mask = lossMask?.[e];
    if (lossMask !== undefined && (!Array.isArray(mask) || mask.length !== ids.length)) {
      throw invalid(`batch.lossMask[${e}] must have one entry per token (${ids.length})`, { example: e, field: "lossMask" });
    }
    ids.forEach((id, t) => {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw invalid(`batch.inputIds[${e}][${t}] = ${id} is not a token id (0 .. ${vocabSize - 1})`, { example: e, position: t });
      }
    });
    n += ids.length;
  });
  const packed: PackedBatch = {
    tokens: new Int32Array(n),
    positions: new Int32Array(n),
    sequenceStart: new Int32Array(n),
    targets: new Int32Array(n).fill(-1),
  };
  let at = 0;
  let counted = 0;
  inputIds.forEach((ids, e) => {
    const mask = lossMask?.[e];
    for (let t = 0; t < ids.length; t++) {
      packed.tokens[at + t] = ids[t]!;
      packed.positions[at + t] = t;
      packed.sequenceStart[at + t] = at;
      if (t + 1 < ids.length && (mask === undefined || mask[t + 1] !== 0)) {
        packed.targets[at + t] = ids[t + 1]!;
        counted++;
      }
    }
    at += ids.length;
  });
  if (counted === 0) throw invalid("the batch has no counted targets (every example is one token, or lossMask drops them all)", {});
  return packed;
}
