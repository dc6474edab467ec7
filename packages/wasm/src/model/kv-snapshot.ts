/**
 * The bytes of a wasm `kv.snapshot`: core's snapshot envelope (magic "IKVS")
 * around one conversation's token ids (u32 LE each) and their KV rows (the
 * `KVCache.copyRows` layout); the header names the model shape and KV type.
 */
import { InferenceError, unwrapSnapshot, wrapSnapshot } from "@infer/core";
import type { KVRows } from "./prefix-cache.js";

const MAGIC = "IKVS";
const VERSION = 1;

/** What a snapshot's rows depend on: restoring into a model that differs in any of these is refused. */
export interface KVIdentity {
  architecture: string;
  vocabSize: number;
  numLayers: number;
  numKVHeads: number;
  headDim: number;
  kvType: string;
}

export function encodeSnapshot(identity: KVIdentity, state: KVRows): Uint8Array {
  const body = new Uint8Array(state.ids.length * 4 + state.rows.length);
  const view = new DataView(body.buffer);
  state.ids.forEach((id, i) => view.setUint32(i * 4, id, true));
  body.set(state.rows, state.ids.length * 4);
  return wrapSnapshot(MAGIC, VERSION, { ...identity, tokens: state.ids.length }, body);
}

/**
 * Reads a snapshot taken of a model of `identity` whose rows take `rowsBytes(n)`
 * bytes for n positions. Not a snapshot, or a damaged one: MODEL_FORMAT; one of
 * another model or longer than the context: INVALID_OPTION.
 */
export function decodeSnapshot(
  bytes: unknown,
  identity: KVIdentity,
  contextLength: number,
  rowsBytes: (positions: number) => number,
): KVRows {
  const { header, body } = unwrapSnapshot(bytes, MAGIC, VERSION, { ...identity });
  const broken = (why: string) => new InferenceError("MODEL_FORMAT", `a damaged KV snapshot: ${why}`);
  const tokens = header.tokens;
  if (typeof tokens !== "number" || !Number.isInteger(tokens) || tokens < 0) throw broken(`token count ${String(tokens)}`);
  if (tokens > contextLength) {
    throw new InferenceError("INVALID_OPTION", `the KV snapshot holds ${tokens} tokens but the context holds ${contextLength}`);
  }
  if (body.length !== tokens * 4 + rowsBytes(tokens)) throw broken(`${body.length} bytes where ${tokens} tokens take ${tokens * 4 + rowsBytes(tokens)}`);
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const ids = Array.from({ length: tokens }, (_, i) => view.getUint32(i * 4, true));
  const outside = ids.find((id) => id >= identity.vocabSize);
  if (outside !== undefined) throw broken(`token id ${outside} is outside the vocabulary`);
  return { ids, rows: body.slice(tokens * 4) };
}
