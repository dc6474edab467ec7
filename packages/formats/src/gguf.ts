/**
 * GGUF v2/v3 reader. Layout (little-endian):
 *   "GGUF" | u32 version | u64 tensor_count | u64 metadata_kv_count
 *   metadata_kv_count x { string key | u32 value_type | value }
 *   tensor_count x { string name | u32 n_dims | u64 dims[n_dims] | u32 ggml_type | u64 offset }
 *   padding to `general.alignment` (default 32) | tensor data (offsets relative to here)
 * where string = u64 byte length | UTF-8 bytes, and an array value is
 * u32 item_type | u64 count | items.
 *
 * Every count and length is checked against the bytes that remain before
 * anything is allocated from it, so a corrupt header fails fast.
 */
import { InferenceError } from "@infer/core";
import { type GgmlType, findTypeInfo, typeName } from "./ggml-types.js";
import { GGUF_SCALAR_BYTES, GgufMetadata, GgufValueType, valueTypeName } from "./gguf-values.js";
import { PackedStrings } from "./packed-strings.js";
import { decodeUtf8 } from "./utf8.js";
import type { GgufArray, GgufArrayItems, GgufValue } from "./gguf-values.js";

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
/** The versions read and written: v1 used 32-bit counts, and big-endian files swap every field. */
export const GGUF_VERSIONS: readonly number[] = [2, 3];
/** Magic, version (u32), tensor count (u64) and metadata count (u64): what every GGUF file starts with. */
export const GGUF_PREAMBLE_BYTES = 24;
/** The fewest bytes one tensor info takes: name length (u64), n_dims (u32), type (u32), offset (u64). */
export const GGUF_MIN_TENSOR_INFO_BYTES = 24;
/** The fewest bytes one metadata entry takes: key length (u64), value type (u32), a one-byte value. */
export const GGUF_MIN_METADATA_ENTRY_BYTES = 13;
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml tensors have at most 4 dimensions. */
export const GGUF_MAX_DIMS = 4;
/** Arrays of arrays are legal; deeper nesting than this is treated as corruption. */
const MAX_ARRAY_NESTING = 4;

export interface GgufTensorInfo {
  name: string;
  /** ggml order: shape[0] is the row length (innermost, contiguous). */
  shape: number[];
  type: GgmlType;
  /** Absolute byte offset of the tensor's data in the file. */
  offset: number;
  byteLength: number;
}

/** What a GGUF file says before its tensor data: everything but the weights. */
export interface GgufHeader {
  source: string;
  version: number;
  metadata: GgufMetadata;
  tensors: GgufTensorInfo[];
  tensorByName(name: string): GgufTensorInfo | undefined;
  alignment: number;
  /** Absolute offset where the tensor data section starts. */
  dataOffset: number;
}

export interface GgufFile extends GgufHeader {
  /** The whole file, or only its tensor data section (readGguf with `memory.release`). */
  bytes: Uint8Array;
  /** The tensor's bytes: a view into `bytes`, not a copy. */
  tensorData(info: GgufTensorInfo): Uint8Array;
}

/**
 * Thrown by the parser when a header goes on past the bytes read so far but
 * within the file: parseGgufHeader answers "read more" for it.
 */
class BeyondPrefix extends Error {}

class GgufCursor {
  readonly view: DataView;
  position = 0;
  // ignoreBOM keeps a leading U+FEFF: a string reads as exactly its bytes.
  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  /** `bytes`: the file, or a prefix of it (then a read past them throws BeyondPrefix). */
  constructor(
    readonly bytes: Uint8Array,
    readonly source: string,
    readonly fileSize = bytes.length,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  fail(field: string, problem: string, code: "MODEL_FORMAT" | "UNSUPPORTED_DTYPE" = "MODEL_FORMAT"): InferenceError {
    return new InferenceError(code, `${this.source}: GGUF ${field}: ${problem}`, {
      details: { file: this.source, field, position: this.position },
    });
  }

  /** Bytes of the file after the cursor. */
  get remaining(): number {
    return this.fileSize - this.position;
  }

  need(count: number, field: string): void {
    if (count > this.remaining) {
      throw this.fail(field, `needs ${count} bytes at offset ${this.position} but the file has only ${this.remaining} left`);
    }
    if (count > this.bytes.length - this.position) throw new BeyondPrefix();
  }

  u8(field: string): number {
    this.need(1, field);
    return this.view.getUint8(this.position++);
  }

  u32(field: string): number {
    this.need(4, field);
    const value = this.view.getUint32(this.position, true);
    this.position += 4;
    return value;
  }

  u64(field: string): bigint {
    this.need(8, field);
    const value = this.view.getBigUint64(this.position, true);
    this.position += 8;
    return value;
  }

  /** A u64 count of items that each take at least `minItemBytes`: checked against the bytes left. */
  count(field: string, minItemBytes: number): number {
    const declared = this.u64(field);
    if (declared * BigInt(minItemBytes) > BigInt(this.remaining)) {
      throw this.fail(field, `declares ${declared} items of at least ${minItemBytes} bytes but only ${this.remaining} bytes remain`);
    }
    return Number(declared);
  }

  string(field: string): string {
    const length = this.count(`${field} (string length)`, 1);
    this.need(length, field);
    const text = decodeUtf8(this.decoder, this.bytes.subarray(this.position, this.position + length));
    this.position += length;
    return text;
  }
}

/** Parses a GGUF file held in memory. `source` names it in error messages. */
export function parseGguf(bytes: Uint8Array, source = "<buffer>"): GgufFile {
  const header = parseHeader(new GgufCursor(bytes, source));
  return { ...header, bytes, tensorData: (info) => bytes.subarray(info.offset, info.offset + info.byteLength) };
}

/**
 * Parses the header of a GGUF file of `fileSize` bytes from its first bytes,
 * `prefix`: undefined when the header goes on past them (read more and call
 * again); the same result or error as parseGguf of the whole file otherwise.
 */
export function parseGgufHeader(prefix: Uint8Array, fileSize: number, source = "<buffer>"): GgufHeader | undefined {
  try {
    return parseHeader(new GgufCursor(prefix, source, fileSize));
  } catch (error) {
    if (error instanceof BeyondPrefix) return undefined;
    throw error;
  }
}

/**
 * The metadata a prefix of a GGUF file of `fileSize` bytes holds: every
 * key/value pair that ends within it (`complete` when that is all of them),
 * checked as parseGguf checks them. For a look at the first keys of a file
 * without reading a long header (a vocabulary of megabytes) to its end.
 */
export function parseGgufMetadataPrefix(
  prefix: Uint8Array,
  fileSize: number,
  source = "<buffer>",
): { version: number; metadata: GgufMetadata; complete: boolean } | undefined {
  const cursor = new GgufCursor(prefix, source, fileSize);
  let preamble;
  try {
    preamble = readPreamble(cursor);
  } catch (error) {
    if (error instanceof BeyondPrefix) return undefined;
    throw error;
  }
  const metadata = new GgufMetadata(source);
  try {
    readMetadata(cursor, preamble.metadataCount, metadata);
  } catch (error) {
    if (error instanceof BeyondPrefix) return { version: preamble.version, metadata, complete: false };
    throw error;
  }
  return { version: preamble.version, metadata, complete: true };
}

/** True when `bytes` start with the GGUF magic. */
export function hasGgufMagic(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === GGUF_MAGIC;
}

function readPreamble(cursor: GgufCursor): { version: number; tensorCount: number; metadataCount: number } {
  const { bytes } = cursor;
  if (bytes.length < Math.min(4, cursor.fileSize)) throw new BeyondPrefix();
  if (bytes.length < 4 || cursor.view.getUint32(0, true) !== GGUF_MAGIC) {
    throw cursor.fail("magic", `expected "GGUF" at the start, found ${describeMagic(bytes)}`);
  }
  cursor.position = 4;
  const version = cursor.u32("version");
  if (!GGUF_VERSIONS.includes(version)) throw cursor.fail("version", describeVersion(version));
  const tensorCount = cursor.count("tensor_count", GGUF_MIN_TENSOR_INFO_BYTES);
  const metadataCount = cursor.count("metadata_kv_count", GGUF_MIN_METADATA_ENTRY_BYTES);
  return { version, tensorCount, metadataCount };
}

/** Reads `count` key/value pairs into `metadata`, which keeps those read when a later one fails. */
function readMetadata(cursor: GgufCursor, count: number, metadata: GgufMetadata): void {
  for (let i = 0; i < count; i++) {
    const key = cursor.string(`metadata key #${i}`);
    if (metadata.has(key)) throw cursor.fail(`metadata["${key}"]`, "the key appears twice");
    const type = cursor.u32(`metadata["${key}"] value type`);
    metadata.set(key, readValue(cursor, type, `metadata["${key}"]`, 0));
  }
}

function parseHeader(cursor: GgufCursor): GgufHeader {
  const { source } = cursor;
  const { version, tensorCount, metadataCount } = readPreamble(cursor);
  const metadata = new GgufMetadata(source);
  readMetadata(cursor, metadataCount, metadata);
  const infos = readTensorInfos(cursor, tensorCount);
  const alignment = readAlignment(cursor, metadata);
  const dataOffset = alignUp(cursor.position, alignment);
  const tensors = placeTensors(cursor, infos, alignment, dataOffset);
  const byName = new Map(tensors.map((tensor) => [tensor.name, tensor]));
  return { source, version, metadata, tensors, tensorByName: (name) => byName.get(name), alignment, dataOffset };
}

function describeMagic(bytes: Uint8Array): string {
  const head = Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, "0")).join(" ");
  return head ? `bytes ${head}` : "an empty file";
}

function describeVersion(version: number): string {
  if (version === 1) return "GGUF v1 is not supported (convert the model to v3)";
  const swapped = ((version & 0xff) << 24) | ((version & 0xff00) << 8) | ((version >>> 8) & 0xff00) | (version >>> 24);
  if (swapped === 2 || swapped === 3) return `version ${version} is a big-endian GGUF, which is not supported`;
  return `unsupported version ${version} (supported: 2, 3)`;
}

function readValue(cursor: GgufCursor, type: number, field: string, depth: number): GgufValue {
  switch (type) {
    case GgufValueType.UINT8:
      return { type, value: cursor.u8(field) };
    case GgufValueType.INT8:
      cursor.need(1, field);
      return { type, value: cursor.view.getInt8(cursor.position++) };
    case GgufValueType.BOOL:
      return { type, value: cursor.u8(field) !== 0 };
    case GgufValueType.STRING:
      return { type, value: cursor.string(field) };
    case GgufValueType.ARRAY:
      return readArray(cursor, field, depth);
    case GgufValueType.UINT64:
      return { type, value: cursor.u64(field) };
    case GgufValueType.INT64: {
      cursor.need(8, field);
      const value = cursor.view.getBigInt64(cursor.position, true);
      cursor.position += 8;
      return { type, value };
    }
  }
  const items = readNumbers(cursor, type, 1, field);
  if (items === undefined) throw cursor.fail(field, `unknown value type ${type}`);
  return { type, value: Number((items as ArrayLike<number | bigint>)[0]) } as GgufValue;
}

/** `count` fixed-size numbers as the matching typed array, or undefined for a non-numeric type. */
function readNumbers(cursor: GgufCursor, type: number, count: number, field: string): GgufArrayItems | undefined {
  const itemBytes = GGUF_SCALAR_BYTES.get(type);
  if (itemBytes === undefined || type === GgufValueType.BOOL) return undefined;
  cursor.need(count * itemBytes, field);
  // Typed arrays use the host's byte order; GGUF is little-endian.
  if (!hostIsLittleEndian) throw cursor.fail(field, "reading GGUF on a big-endian host is not supported");
  // Copy into a fresh aligned buffer: the source offset is rarely aligned for a typed array view.
  const start = cursor.bytes.byteOffset + cursor.position;
  const copy = cursor.bytes.buffer.slice(start, start + count * itemBytes);
  cursor.position += count * itemBytes;
  switch (type as GgufValueType) {
    case GgufValueType.UINT8:
      return new Uint8Array(copy);
    case GgufValueType.INT8:
      return new Int8Array(copy);
    case GgufValueType.UINT16:
      return new Uint16Array(copy);
    case GgufValueType.INT16:
      return new Int16Array(copy);
    case GgufValueType.UINT32:
      return new Uint32Array(copy);
    case GgufValueType.INT32:
      return new Int32Array(copy);
    case GgufValueType.FLOAT32:
      return new Float32Array(copy);
    case GgufValueType.FLOAT64:
      return new Float64Array(copy);
    case GgufValueType.UINT64:
      return new BigUint64Array(copy);
    case GgufValueType.INT64:
      return new BigInt64Array(copy);
  }
  return undefined;
}

const hostIsLittleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function readArray(cursor: GgufCursor, field: string, depth: number): GgufArray {
  if (depth >= MAX_ARRAY_NESTING) throw cursor.fail(field, `arrays nested deeper than ${MAX_ARRAY_NESTING} levels`);
  const itemType = cursor.u32(`${field} item type`);
  const type = GgufValueType.ARRAY as const;
  switch (itemType) {
    case GgufValueType.STRING:
      return { type, itemType, value: readStrings(cursor, field) };
    case GgufValueType.BOOL: {
      const count = cursor.count(`${field} array length`, 1);
      cursor.need(count, field);
      const value = Array.from(cursor.bytes.subarray(cursor.position, cursor.position + count), (b) => b !== 0);
      cursor.position += count;
      return { type, itemType, value };
    }
    case GgufValueType.ARRAY: {
      const count = cursor.count(`${field} array length`, 12);
      const value: GgufArray[] = [];
      for (let i = 0; i < count; i++) value.push(readArray(cursor, `${field}[${i}]`, depth + 1));
      return { type, itemType, value };
    }
  }
  const itemBytes = GGUF_SCALAR_BYTES.get(itemType);
  if (itemBytes === undefined) throw cursor.fail(`${field} item type`, `unknown value type ${itemType}`);
  const count = cursor.count(`${field} array length`, itemBytes);
  return { type, itemType, value: readNumbers(cursor, itemType, count, field)! };
}

/**
 * A string array packed as its bytes, without a JavaScript string per item:
 * one pass checks every length against the file and sums them, a second
 * copies the bytes into one buffer of exactly that size. Both allocate
 * nothing per item (no field name, bigint or view for each of 150,000
 * tokens), so reading a vocabulary leaves no garbage to collect.
 */
function readStrings(cursor: GgufCursor, field: string): PackedStrings {
  const count = cursor.count(`${field} array length`, 8);
  const { view, bytes: source } = cursor;
  const first = cursor.position;
  const starts = new Uint32Array(count + 1);
  let position = first;
  for (let i = 0; i < count; i++) {
    const fits = position + 8 <= source.length && view.getUint32(position + 4, true) === 0;
    const length = fits ? view.getUint32(position, true) : 0;
    if (!fits || length > cursor.fileSize - position - 8) {
      // The cursor's own checks word a length beyond the file; past them, the length needs a high word.
      cursor.position = position;
      cursor.count(`${field}[${i}] (string length)`, 1);
      throw cursor.fail(`${field}[${i}]`, "is a string of 4 GiB or more");
    }
    if (length > source.length - position - 8) throw new BeyondPrefix();
    position += 8 + length;
    const end = starts[i]! + length;
    if (end > 0xffffffff) throw cursor.fail(field, "holds more than 4 GiB of strings");
    starts[i + 1] = end;
  }
  const bytes = new Uint8Array(starts[count]!);
  position = first;
  for (let i = 0; i < count; i++) {
    position += 8;
    for (let at = starts[i]!, end = starts[i + 1]!; at < end; at++) bytes[at] = source[position++]!;
  }
  cursor.position = position;
  return new PackedStrings(bytes, starts);
}

interface RawTensorInfo {
  name: string;
  shape: number[];
  type: GgmlType;
  relativeOffset: bigint;
}

function readTensorInfos(cursor: GgufCursor, count: number): RawTensorInfo[] {
  const infos: RawTensorInfo[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const name = cursor.string(`tensor #${i} name`);
    const field = `tensor "${name}"`;
    if (seen.has(name)) throw cursor.fail(field, "the name appears twice");
    seen.add(name);
    const dims = cursor.u32(`${field} n_dims`);
    if (dims < 1 || dims > GGUF_MAX_DIMS) throw cursor.fail(`${field} n_dims`, `${dims} dimensions (expected 1 to ${GGUF_MAX_DIMS})`);
    const shape: number[] = [];
    let elements = 1n;
    for (let d = 0; d < dims; d++) {
      const size = cursor.u64(`${field} shape[${d}]`);
      if (size < 1n) throw cursor.fail(`${field} shape[${d}]`, `dimension ${size} is not positive`);
      elements *= size;
      if (elements > BigInt(Number.MAX_SAFE_INTEGER)) throw cursor.fail(`${field} shape`, "the element count is beyond any file");
      shape.push(Number(size));
    }
    const typeId = cursor.u32(`${field} type`);
    const info = findTypeInfo(typeId);
    if (!info) throw cursor.fail(`${field} type`, `unknown ggml type id ${typeId}`, "UNSUPPORTED_DTYPE");
    if (shape[0]! % info.blockSize !== 0) {
      throw cursor.fail(
        `${field} shape[0]`,
        `row length ${shape[0]} is not a multiple of the ${info.name} block size ${info.blockSize}`,
      );
    }
    const relativeOffset = cursor.u64(`${field} offset`);
    infos.push({ name, shape, type: typeId as GgmlType, relativeOffset });
  }
  return infos;
}

function readAlignment(cursor: GgufCursor, metadata: GgufMetadata): number {
  const stored = metadata.get("general.alignment");
  if (stored === undefined) return GGUF_DEFAULT_ALIGNMENT;
  const field = 'metadata["general.alignment"]';
  if (stored.type !== GgufValueType.UINT32) throw cursor.fail(field, `has type ${valueTypeName(stored.type)}, expected UINT32`);
  const alignment = stored.value;
  if (alignment === 0 || (alignment & (alignment - 1)) !== 0) throw cursor.fail(field, `${alignment} is not a power of two`);
  return alignment;
}

function alignUp(offset: number, alignment: number): number {
  return Math.ceil(offset / alignment) * alignment;
}

function placeTensors(cursor: GgufCursor, infos: RawTensorInfo[], alignment: number, dataOffset: number): GgufTensorInfo[] {
  const fileSize = cursor.fileSize;
  const tensors = infos.map((raw): GgufTensorInfo => {
    const field = `tensor "${raw.name}"`;
    const info = findTypeInfo(raw.type)!;
    const elements = raw.shape.reduce((a, b) => a * b, 1);
    const byteLength = (elements / info.blockSize) * info.bytesPerBlock;
    if (raw.relativeOffset % BigInt(alignment) !== 0n) {
      throw cursor.fail(`${field} offset`, `${raw.relativeOffset} is not a multiple of the alignment ${alignment}`);
    }
    const end = BigInt(dataOffset) + raw.relativeOffset + BigInt(byteLength);
    if (end > BigInt(fileSize)) {
      throw cursor.fail(
        `${field} offset`,
        `${typeName(raw.type)} data of ${byteLength} bytes at data offset ${raw.relativeOffset} ends at ${end}, beyond the file's ${fileSize} bytes`,
      );
    }
    return { name: raw.name, shape: raw.shape, type: raw.type, offset: dataOffset + Number(raw.relativeOffset), byteLength };
  });
  const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < byOffset.length; i++) {
    const previous = byOffset[i - 1]!;
    const current = byOffset[i]!;
    if (previous.offset + previous.byteLength > current.offset) {
      throw cursor.fail(
        `tensor "${current.name}" offset`,
        `its data overlaps tensor "${previous.name}" (${previous.offset}..${previous.offset + previous.byteLength} vs ${current.offset})`,
      );
    }
  }
  assertNoLongTail(cursor, byOffset.at(-1), alignment, dataOffset);
  return tensors;
}

/** Bytes after the last tensor's data that any file may carry (a writer's padding, a stray block). */
const TAIL_BYTES_ALLOWED = 2 ** 20;

/**
 * A GGUF file ends with its tensor data. Readers cost what the whole file costs (llama.cpp maps and
 * prefetches all of it, a reader into memory copies all of it), so a tail beyond a little padding and
 * beyond the size of the tensor data itself is refused: a 400 KB model with 100 GB of zeros after it
 * took minutes and filled the page cache before it loaded.
 */
function assertNoLongTail(cursor: GgufCursor, last: GgufTensorInfo | undefined, alignment: number, dataOffset: number): void {
  const dataEnd = last ? last.offset + last.byteLength : dataOffset;
  const tail = cursor.fileSize - alignUp(dataEnd, alignment);
  const described = dataEnd - dataOffset;
  if (tail > Math.max(TAIL_BYTES_ALLOWED, described)) {
    throw cursor.fail("file size", `${tail} bytes follow the last tensor's data, more than the ${described} bytes of tensor data: the file is not the model its header describes`);
  }
}
