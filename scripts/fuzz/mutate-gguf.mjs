// Structure-aware GGUF mutations. A small layout scanner finds where each header field lies (the fuzzer needs
// offsets, which no loader exposes), then one field is set to a boundary value, a metadata value to a hostile
// number, or bytes are mutated inside the header only, so the mutant gets past the magic and into the parser.
import { boundaryValues, mutateBytes, readUnsigned, writeUnsigned } from "./mutate-bytes.mjs";

/** GGUF value types: byte width of the fixed-size ones. */
const WIDTH = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;
const FLOAT32 = 6;
const FLOAT64 = 12;

/**
 * Walks a GGUF v2/v3 header. Returns the fields (kind, offset, width, plus the key or tensor they belong
 * to) and where the header ends; stops quietly at the first thing it cannot read (mutants are scanned too).
 */
export function scanGguf(bytes) {
  const fields = [];
  const kvs = [];
  const tensors = [];
  let at = 0;
  const need = (n) => {
    if (at + n > bytes.length) throw new RangeError("short");
  };
  const field = (kind, width, extra = {}) => {
    need(width);
    const f = { kind, offset: at, width, value: readUnsigned(bytes, at, width), ...extra };
    fields.push(f);
    at += width;
    return f;
  };
  const string = (kind, extra) => {
    const length = field(kind, 8, extra).value;
    if (length > BigInt(bytes.length)) throw new RangeError("string past the end");
    const start = at;
    at += Number(length);
    need(0);
    return bytes.subarray(start, at).toString("utf8");
  };
  try {
    field("magic", 4);
    field("version", 4);
    const tensorCount = field("tensor_count", 8).value;
    const kvCount = field("kv_count", 8).value;
    for (let i = 0n; i < kvCount; i++) {
      const key = string("key_length");
      const type = Number(field("value_type", 4, { key }).value);
      const kv = { key, type, offset: at, width: 0 };
      if (type === STRING) {
        string("string_length", { key });
      } else if (type === ARRAY) {
        const elementType = Number(field("array_type", 4, { key }).value);
        const count = field("array_count", 8, { key }).value;
        kv.elementType = elementType;
        if (elementType === STRING) {
          for (let j = 0n; j < count; j++) string("string_length", { key, element: true });
        } else if (WIDTH[elementType]) {
          at += Number(count) * WIDTH[elementType];
          need(0);
        } else throw new RangeError("nested array");
      } else if (WIDTH[type]) {
        need(WIDTH[type]);
        kv.width = WIDTH[type];
        at += WIDTH[type];
      } else throw new RangeError("bad type");
      kvs.push(kv);
    }
    for (let i = 0n; i < tensorCount; i++) {
      const name = string("tensor_name_length", { tensor: true });
      const dims = Number(field("tensor_n_dims", 4, { name }).value);
      for (let d = 0; d < dims; d++) field("tensor_dim", 8, { name });
      field("tensor_type", 4, { name });
      field("tensor_offset", 8, { name });
      tensors.push(name);
    }
  } catch {
    return { fields, kvs, tensors, headerEnd: at, complete: false };
  }
  return { fields, kvs, tensors, headerEnd: at, complete: true };
}

const HEADER_KINDS = ["version", "tensor_count", "kv_count", "key_length", "value_type", "string_length", "array_type", "array_count"];
const TENSOR_KINDS = ["tensor_count", "tensor_name_length", "tensor_n_dims", "tensor_dim", "tensor_type", "tensor_offset"];

/** Keys whose values size or shape the model: worth hostile numbers. */
const MODEL_KEYS = /block_count|head_count|embedding_length|context_length|feed_forward|epsilon|freq_base|key_length|value_length|dimension_count|vocab_size|sliding_window|token_id|alignment|scaling/;

function hostileNumber(r, type) {
  if (type === FLOAT32 || type === FLOAT64) return r.pick([NaN, -1, 0, -0, Infinity, -Infinity, 1e30, 3.4e38, 1e-45, -1e-5]);
  return r.pick([0, 1, 65535, 65536, 0x7fffffff, 0x80000000, 0xffffffff, 4096, 1 << 20]);
}

function setNumber(bytes, kv, value) {
  const { offset, type } = kv;
  if (type === FLOAT32) bytes.writeFloatLE(value, offset);
  else if (type === FLOAT64) bytes.writeDoubleLE(value, offset);
  else if (type === 10 || type === 11) bytes.writeBigUInt64LE(BigInt(value) & 0xffffffffffffffffn, offset);
  else writeUnsigned(bytes, offset, kv.width, BigInt(value));
}

const describe = (f) => `${f.kind}${f.key ? `[${f.key}]` : f.name ? `[${f.name}]` : ""}`;

/**
 * One mutant of a GGUF seed. `part` is "header" (metadata) or "tensors" (the tensor-info table): the
 * structure-aware mutations stay in that part; byte mutations cover the whole header.
 */
export function mutateGguf(r, seed, part) {
  const layout = layoutOf(seed);
  const kinds = part === "header" ? HEADER_KINDS : TENSOR_KINDS;
  const fields = layout.fields.filter((f) => kinds.includes(f.kind) && !(f.element && r.chance(0.9)));
  const numeric = layout.kvs.filter((kv) => kv.width > 0 && MODEL_KEYS.test(kv.key));
  const choice = r.weighted([
    [5, "field"],
    [part === "header" ? 3 : 0, "value"],
    [3, "bytes"],
    [1, "truncate"],
  ]);
  if (choice === "field" && fields.length > 0) {
    const f = r.pick(fields);
    const value = r.pick(boundaryValues(f.width, f.value));
    const out = Buffer.from(seed);
    writeUnsigned(out, f.offset, f.width, value);
    return { bytes: out, tags: [`gguf.${describe(f)}=${value}`] };
  }
  if (choice === "value" && numeric.length > 0) {
    const kv = r.pick(numeric);
    const value = hostileNumber(r, kv.type);
    const out = Buffer.from(seed);
    setNumber(out, kv, value);
    return { bytes: out, tags: [`gguf.value[${kv.key}]=${value}`] };
  }
  if (choice === "truncate") {
    const cut = r.chance(0.7) ? r.int(layout.headerEnd + 1) : layout.headerEnd + r.int(seed.length - layout.headerEnd);
    return { bytes: seed.subarray(0, cut), tags: [`gguf.truncate@${cut}`] };
  }
  const region = part === "header" ? [8, tensorTableStart(layout)] : [tensorTableStart(layout), layout.headerEnd];
  const mutant = mutateBytes(r, seed, region[0], region[1]);
  return { bytes: mutant.bytes, tags: mutant.tags.map((t) => `gguf.${part}.${t}`) };
}

/** Seeds are scanned once: a campaign mutates the same few seeds hundreds of thousands of times. */
const layouts = new WeakMap();
function layoutOf(seed) {
  if (!layouts.has(seed)) layouts.set(seed, scanGguf(seed));
  return layouts.get(seed);
}

function tensorTableStart(layout) {
  const first = layout.fields.find((f) => f.kind === "tensor_name_length");
  return first ? first.offset : layout.headerEnd;
}
