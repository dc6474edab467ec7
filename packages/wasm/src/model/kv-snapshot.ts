/**
 * The bytes of a `kv.snapshot`: one conversation's token ids and their KV rows.
 *
 *   "IKVS" | version (u32 LE) | header length (u32 LE) | header (UTF-8 JSON) |
 *   ids (u32 LE each) | rows (KVCache.copyRows layout)
 *
 * The header names the model shape the rows were computed for, so rows are
 * never loaded into a model they do not fit.
 */
import { InferenceError } from "@infer/core";
import type { KVRows } from "./prefix-cache.js";

const MAGIC = "IKVS";
const VERSION = 1;
const PREAMBLE = 12;

/** What a snapshot's rows depend on: restoring into a model that differs in any of these is refused. */
export interface KVIdentity {
  architecture: string;
  vocabSize: number;
  numLayers: number;
  numKVHeads: number;
  headDim: number;
  kvType: string;
}

interface Header extends KVIdentity {
  tokens: number;
}

export function encodeSnapshot(identity: KVIdentity, state: KVRows): Uint8Array {
  const header = new TextEncoder().encode(JSON.stringify({ ...identity, tokens: state.ids.length } satisfies Header));
  const out = new Uint8Array(PREAMBLE + header.length + state.ids.length * 4 + state.rows.length);
  const view = new DataView(out.buffer);
  out.set(new TextEncoder().encode(MAGIC), 0);
  view.setUint32(4, VERSION, true);
  view.setUint32(8, header.length, true);
  out.set(header, PREAMBLE);
  let at = PREAMBLE + header.length;
  for (const id of state.ids) {
    view.setUint32(at, id, true);
    at += 4;
  }
  out.set(state.rows, at);
  return out;
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
  if (!(bytes instanceof Uint8Array)) throw new InferenceError("INVALID_OPTION", "restoreKV() takes the Uint8Array snapshotKV() gave");
  const broken = (why: string) => new InferenceError("MODEL_FORMAT", `not a KV snapshot of this library: ${why}`);
  if (bytes.length < PREAMBLE || new TextDecoder().decode(bytes.subarray(0, 4)) !== MAGIC) throw broken("no IKVS magic");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(4, true);
  if (version !== VERSION) throw broken(`version ${version}, this library reads ${VERSION}`);
  const headerLength = view.getUint32(8, true);
  if (PREAMBLE + headerLength > bytes.length) throw broken("its header runs past its end");
  let header: Header;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(PREAMBLE, PREAMBLE + headerLength))) as Header;
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", "not a KV snapshot of this library: its header is not JSON", { cause: error });
  }
  if (typeof header !== "object" || header === null) throw broken("its header is not an object");
  for (const key of Object.keys(identity) as (keyof KVIdentity)[]) {
    if (header[key] !== identity[key]) {
      throw new InferenceError(
        "INVALID_OPTION",
        `the KV snapshot is of another model: its ${key} is ${String(header[key])}, this model's ${String(identity[key])}`,
        { details: { field: key } },
      );
    }
  }
  const tokens = header.tokens;
  if (!Number.isInteger(tokens) || tokens < 0) throw broken(`token count ${String(tokens)}`);
  if (tokens > contextLength) {
    throw new InferenceError("INVALID_OPTION", `the KV snapshot holds ${tokens} tokens but the context holds ${contextLength}`);
  }
  const idsAt = PREAMBLE + headerLength;
  const rowsAt = idsAt + tokens * 4;
  if (bytes.length !== rowsAt + rowsBytes(tokens)) throw broken(`${bytes.length} bytes where ${tokens} tokens take ${rowsAt + rowsBytes(tokens)}`);
  const ids = Array.from({ length: tokens }, (_, i) => view.getUint32(idsAt + i * 4, true));
  const outside = ids.find((id) => id >= identity.vocabSize);
  if (outside !== undefined) throw broken(`token id ${outside} is outside the vocabulary`);
  return { ids, rows: bytes.slice(rowsAt) };
}
