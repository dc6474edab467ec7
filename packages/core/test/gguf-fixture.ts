/**
 * Writes the smallest valid GGUF v3 file by hand (no tensors), so format
 * detection and loading are tested against the spec's layout rather than our reader:
 * magic "GGUF", u32 version, u64 tensor count, u64 kv count, then per kv a
 * u64-length-prefixed key, a u32 value type and the value.
 */
const GGUF_TYPE_UINT32 = 4;
const GGUF_TYPE_STRING = 8;

export interface GgufFixture {
  architecture?: string;
  fileType?: number;
}

export function ggufHeader(fixture: GgufFixture): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    parts.push(b);
  };
  const u64 = (n: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    parts.push(b);
  };
  const str = (s: string) => {
    u64(Buffer.byteLength(s));
    parts.push(Buffer.from(s, "utf8"));
  };
  const kvCount = (fixture.architecture !== undefined ? 1 : 0) + (fixture.fileType !== undefined ? 1 : 0);
  parts.push(Buffer.from("GGUF", "latin1"));
  u32(3);
  u64(0);
  u64(kvCount);
  if (fixture.architecture !== undefined) {
    str("general.architecture");
    u32(GGUF_TYPE_STRING);
    str(fixture.architecture);
  }
  if (fixture.fileType !== undefined) {
    str("general.file_type");
    u32(GGUF_TYPE_UINT32);
    u32(fixture.fileType);
  }
  return Buffer.concat(parts);
}
