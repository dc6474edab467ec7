// Mutations that know nothing of the format: bit flips, byte overwrites, chunk moves, truncation.
// They find what structure-aware mutations miss (a length that lands mid-field, a half-written header).

const INTERESTING_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xff];

/**
 * Returns a mutated copy of `bytes`, changes limited to [from, to) (the region worth mutating:
 * a file's header rather than its weights), and a tag naming what was done.
 */
export function mutateBytes(r, bytes, from = 0, to = bytes.length) {
  const out = Buffer.from(bytes);
  const span = Math.max(1, Math.min(to, out.length) - from);
  const at = () => from + r.int(span);
  const kind = r.weighted([[4, "flip"], [3, "set"], [2, "chunk"], [1, "truncate"], [1, "insert"], [1, "delete"]]);
  switch (kind) {
    case "flip": {
      const n = 1 + r.int(4);
      for (let i = 0; i < n; i++) out[at()] ^= 1 << r.int(8);
      return { bytes: out, tags: [`bytes.flip x${n}`] };
    }
    case "set": {
      const n = 1 + r.int(4);
      for (let i = 0; i < n; i++) out[at()] = r.chance(0.5) ? r.pick(INTERESTING_BYTES) : r.int(256);
      return { bytes: out, tags: [`bytes.set x${n}`] };
    }
    case "chunk": {
      // Copy a run of bytes over another place in the region: shifts fields into each other.
      const length = 1 + r.int(16);
      const src = at();
      const dst = at();
      out.copy(out, dst, src, Math.min(src + length, out.length));
      return { bytes: out, tags: ["bytes.chunk"] };
    }
    case "truncate":
      return { bytes: out.subarray(0, at()), tags: ["bytes.truncate"] };
    case "insert": {
      const where = at();
      const extra = Buffer.alloc(1 + r.int(16), r.pick(INTERESTING_BYTES));
      return { bytes: Buffer.concat([out.subarray(0, where), extra, out.subarray(where)]), tags: ["bytes.insert"] };
    }
    default: {
      const where = at();
      return { bytes: Buffer.concat([out.subarray(0, where), out.subarray(where + 1 + r.int(16))]), tags: ["bytes.delete"] };
    }
  }
}

/** Boundary values for an unsigned field `bytes` wide (4 or 8), as bigints. */
export function boundaryValues(width, original) {
  const values = [0n, 1n, 2n, 0x7fffffffn, 0x80000000n, 0xffffffffn, 65535n, 65536n];
  if (width === 8) values.push(0x100000000n, 1n << 62n, 1n << 63n, (1n << 64n) - 1n);
  if (original !== undefined) values.push(original + 1n, original > 0n ? original - 1n : 0n, original * 2n, original * 1000n);
  const max = (1n << BigInt(8 * width)) - 1n;
  return values.map((v) => v & max);
}

export function writeUnsigned(buffer, offset, width, value) {
  if (width === 8) buffer.writeBigUInt64LE(value, offset);
  else if (width === 4) buffer.writeUInt32LE(Number(value & 0xffffffffn), offset);
  else if (width === 2) buffer.writeUInt16LE(Number(value & 0xffffn), offset);
  else buffer.writeUInt8(Number(value & 0xffn), offset);
}

export function readUnsigned(buffer, offset, width) {
  if (width === 8) return buffer.readBigUInt64LE(offset);
  if (width === 4) return BigInt(buffer.readUInt32LE(offset));
  if (width === 2) return BigInt(buffer.readUInt16LE(offset));
  return BigInt(buffer.readUInt8(offset));
}
