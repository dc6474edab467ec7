// Safetensors mutations: the JSON header's tensor entries (dtype, shape, data_offsets) edited, the
// header-length prefix set to boundary values, or the header bytes mutated.
import { boundaryValues, mutateBytes } from "./mutate-bytes.mjs";
import { mutateJsonValue } from "./mutate-json.mjs";

const DTYPES = ["F32", "F16", "BF16", "F64", "I8", "U8", "I32", "I64", "BOOL", "F8_E4M3", "", "f32", 0, null];

function hostileShape(r, shape) {
  return r.pick([[], [0], [-1], [2 ** 31], [2 ** 32, 2 ** 32], [1.5], ["8"], [...shape, 1], shape.slice(1), shape.map((d) => d * 2), [1e20], null]);
}

function hostileOffsets(r, [begin, end], fileLength) {
  return r.pick([[0, 0], [end, begin], [begin, end + 4], [begin, fileLength * 2], [-4, end], [begin + 0.5, end], [begin], [2 ** 53, 2 ** 53 + 4], [begin + 1, end + 1], "0"]);
}

export function mutateSafetensors(r, seed) {
  const headerLength = Number(seed.readBigUInt64LE(0));
  const headerEnd = 8 + headerLength;
  const choice = r.weighted([[6, "entry"], [1, "length"], [2, "bytes"], [1, "json"]]);
  if (choice === "length") {
    const out = Buffer.from(seed);
    const value = r.pick(boundaryValues(8, BigInt(headerLength)));
    out.writeBigUInt64LE(value, 0);
    return { bytes: out, tags: [`safetensors.header_length=${value}`] };
  }
  if (choice === "bytes") {
    const mutant = mutateBytes(r, seed, 8, headerEnd);
    return { bytes: mutant.bytes, tags: mutant.tags.map((t) => `safetensors.${t}`) };
  }
  const header = JSON.parse(seed.subarray(8, headerEnd).toString("utf8"));
  const data = seed.subarray(headerEnd);
  let tags;
  if (choice === "json") {
    tags = mutateJsonValue(r, header).tags;
  } else {
    const names = Object.keys(header).filter((k) => k !== "__metadata__");
    const name = r.pick(names);
    const entry = header[name];
    const field = r.pick(["dtype", "shape", "data_offsets", "data_offsets", "entry"]);
    if (field === "dtype") entry.dtype = r.pick(DTYPES);
    else if (field === "shape") entry.shape = hostileShape(r, entry.shape);
    else if (field === "data_offsets") entry.data_offsets = hostileOffsets(r, entry.data_offsets, data.length);
    else delete header[name];
    tags = [`safetensors.${field}[${name}]`];
  }
  const json = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));
  return { bytes: Buffer.concat([prefix, json, data]), tags };
}
