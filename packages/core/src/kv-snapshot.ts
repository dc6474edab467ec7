/**
 * The envelope both local backends put around a `kv.snapshot`:
 *
 *   magic (4 ASCII bytes) | version (u32 LE) | header length (u32 LE) | header (UTF-8 JSON) | body
 *
 * The header names the model the state belongs to; a snapshot is read back
 * only by a model with the same identity, so KV rows never land in a model
 * they do not fit.
 */
import { InferenceError } from "./errors.js";

const PREAMBLE = 12;

export function wrapSnapshot(magic: string, version: number, header: object, body: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(PREAMBLE + json.length + body.length);
  const view = new DataView(out.buffer);
  out.set(new TextEncoder().encode(magic), 0);
  view.setUint32(4, version, true);
  view.setUint32(8, json.length, true);
  out.set(json, PREAMBLE);
  out.set(body, PREAMBLE + json.length);
  return out;
}

/**
 * The header and body of a snapshot whose header agrees with `identity` on
 * every field. Not a Uint8Array: INVALID_OPTION; not this envelope or damaged:
 * MODEL_FORMAT; another model's: INVALID_OPTION naming the field.
 */
export function unwrapSnapshot(
  bytes: unknown,
  magic: string,
  version: number,
  identity: Record<string, unknown>,
): { header: Record<string, unknown>; body: Uint8Array } {
  if (!(bytes instanceof Uint8Array)) throw new InferenceError("INVALID_OPTION", "restoreKV() takes the Uint8Array snapshotKV() gave");
  const broken = (why: string, cause?: unknown) =>
    new InferenceError("MODEL_FORMAT", `not a KV snapshot of this backend: ${why}`, cause === undefined ? {} : { cause });
  if (bytes.length < PREAMBLE || new TextDecoder().decode(bytes.subarray(0, 4)) !== magic) throw broken(`no ${magic} magic`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const found = view.getUint32(4, true);
  if (found !== version) throw broken(`version ${found}, this library reads ${version}`);
  const end = PREAMBLE + view.getUint32(8, true);
  if (end > bytes.length) throw broken("its header runs past its end");
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(PREAMBLE, end)));
  } catch (error) {
    throw broken("its header is not JSON", error);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw broken("its header is not an object");
  const fields = header as Record<string, unknown>;
  for (const [key, value] of Object.entries(identity)) {
    if (fields[key] !== value) {
      throw new InferenceError(
        "INVALID_OPTION",
        `the KV snapshot is of another model: its ${key} is ${String(fields[key])}, this model's ${String(value)}`,
        { details: { field: key } },
      );
    }
  }
  return { header: fields, body: bytes.subarray(end) };
}
