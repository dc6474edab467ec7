/**
 * GGUF v3 writer: the layout gguf.ts reads, laid out as llama.cpp's own
 * writer does (tensor data aligned, each tensor padded to the alignment).
 */
import { InferenceError } from "@infer/core";
import { quantize } from "./ggml-quantize.js";
import { GgmlType, rowBytes, typeInfo } from "./ggml-types.js";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_MAX_DIMS } from "./gguf.js";
import { GgufValueType, valueTypeName } from "./gguf-values.js";
import type { GgufArray, GgufArrayItems, GgufValue } from "./gguf-values.js";
import { PackedStrings } from "./packed-strings.js";

/**
 * A metadata value: an explicitly typed GgufValue, or a plain value whose type
 * is inferred: string -> STRING, boolean -> BOOL, integer -> UINT32 when >= 0
 * else INT32 (UINT64/INT64 beyond 32 bits), other numbers -> FLOAT32,
 * bigint -> UINT64 when >= 0 else INT64, string[] -> ARRAY of STRING,
 * boolean[] -> ARRAY of BOOL, number[] -> ARRAY of INT32 when every item is an
 * int32, else FLOAT32, and each typed array -> ARRAY of its own item type.
 */
export type GgufValueInput =
  | GgufValue
  | string
  | boolean
  | number
  | bigint
  | string[]
  | boolean[]
  | number[]
  | Exclude<GgufArrayItems, string[] | boolean[] | GgufArray[]>
  | PackedStrings;

export interface GgufTensorSpec {
  name: string;
  /** ggml order: shape[0] is the row length. */
  shape: number[];
  type: GgmlType;
  /** Values to encode in `type`, or bytes already encoded in `type`. */
  data: Float32Array | Uint8Array;
}

export interface GgufWriteSpec {
  metadata?: Record<string, GgufValueInput> | ReadonlyMap<string, GgufValueInput>;
  tensors?: GgufTensorSpec[];
  /** Tensor data alignment; stored as general.alignment only when not the default 32. */
  alignment?: number;
}

function invalid(field: string, problem: string): InferenceError {
  return new InferenceError("INVALID_OPTION", `writeGguf: ${field}: ${problem}`, { details: { field } });
}

/** Growable little-endian byte buffer. */
class ByteSink {
  private buffer = new Uint8Array(1024);
  private view = new DataView(this.buffer.buffer);
  length = 0;
  private readonly encoder = new TextEncoder();

  private reserve(count: number): number {
    if (this.length + count > this.buffer.length) {
      const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + count));
      grown.set(this.buffer.subarray(0, this.length));
      this.buffer = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.length;
    this.length += count;
    return at;
  }

  u8(value: number): void {
    const at = this.reserve(1);
    this.view.setUint8(at, value);
  }
  u32(value: number): void {
    const at = this.reserve(4);
    this.view.setUint32(at, value, true);
  }
  u64(value: bigint | number): void {
    const at = this.reserve(8);
    this.view.setBigUint64(at, BigInt(value), true);
  }
  bytes(data: Uint8Array): void {
    const at = this.reserve(data.length); // first: reserve may replace this.buffer
    this.buffer.set(data, at);
  }
  string(text: string): void {
    this.stringBytes(this.encoder.encode(text));
  }
  stringBytes(encoded: Uint8Array): void {
    this.u64(encoded.length);
    this.bytes(encoded);
  }
  padTo(alignment: number): void {
    this.reserve((alignment - (this.length % alignment)) % alignment); // zero bytes: buffers start zeroed
  }
  result(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}

/** Serializes metadata and tensors to a GGUF v3 file image. */
export function writeGguf(spec: GgufWriteSpec): Uint8Array {
  const entries = spec.metadata instanceof Map ? [...spec.metadata] : Object.entries(spec.metadata ?? {});
  const metadata = new Map<string, GgufValue>();
  for (const [key, input] of entries) metadata.set(key, toGgufValue(input, `metadata["${key}"]`));
  const alignment = chooseAlignment(spec.alignment, metadata);
  if (alignment !== GGUF_DEFAULT_ALIGNMENT && !metadata.has("general.alignment")) {
    metadata.set("general.alignment", { type: GgufValueType.UINT32, value: alignment });
  }

  const tensors = (spec.tensors ?? []).map(encodeTensor);
  const seen = new Set<string>();
  for (const tensor of tensors) {
    if (seen.has(tensor.name)) throw invalid(`tensor "${tensor.name}"`, "the name appears twice");
    seen.add(tensor.name);
  }

  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(3);
  sink.u64(tensors.length);
  sink.u64(metadata.size);
  for (const [key, value] of metadata) {
    sink.string(key);
    sink.u32(value.type);
    writeValue(sink, value);
  }
  let relativeOffset = 0;
  for (const tensor of tensors) {
    sink.string(tensor.name);
    sink.u32(tensor.shape.length);
    for (const size of tensor.shape) sink.u64(size);
    sink.u32(tensor.type);
    sink.u64(relativeOffset);
    relativeOffset += Math.ceil(tensor.bytes.length / alignment) * alignment;
  }
  sink.padTo(alignment);
  for (const tensor of tensors) {
    sink.bytes(tensor.bytes);
    sink.padTo(alignment);
  }
  return sink.result();
}

function chooseAlignment(requested: number | undefined, metadata: Map<string, GgufValue>): number {
  const stored = metadata.get("general.alignment");
  if (stored !== undefined && stored.type !== GgufValueType.UINT32) {
    throw invalid('metadata["general.alignment"]', `must be UINT32, got ${valueTypeName(stored.type)}`);
  }
  const fromMetadata = stored?.value as number | undefined;
  if (requested !== undefined && fromMetadata !== undefined && requested !== fromMetadata) {
    throw invalid("alignment", `${requested} disagrees with metadata general.alignment ${fromMetadata}`);
  }
  const alignment = requested ?? fromMetadata ?? GGUF_DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment < 1 || alignment > 0xffffffff || (alignment & (alignment - 1)) !== 0) {
    throw invalid("alignment", `${alignment} is not a power of two`);
  }
  return alignment;
}

function encodeTensor(tensor: GgufTensorSpec): { name: string; shape: number[]; type: GgmlType; bytes: Uint8Array } {
  const field = `tensor "${tensor.name}"`;
  if (typeof tensor.name !== "string" || tensor.name.length === 0) throw invalid("tensor name", "must be a non-empty string");
  const { shape, type, data } = tensor;
  if (shape.length < 1 || shape.length > GGUF_MAX_DIMS) throw invalid(`${field} shape`, `needs 1 to ${GGUF_MAX_DIMS} dimensions`);
  if (!shape.every((size) => Number.isSafeInteger(size) && size > 0)) throw invalid(`${field} shape`, `[${shape}] has a non-positive or non-integer size`);
  const info = typeInfo(type);
  if (shape[0]! % info.blockSize !== 0) {
    throw invalid(`${field} shape[0]`, `row length ${shape[0]} is not a multiple of the ${info.name} block size ${info.blockSize}`);
  }
  const elements = shape.reduce((a, b) => a * b, 1);
  const expectedBytes = rowBytes(type, shape[0]!) * (elements / shape[0]!);
  if (data instanceof Float32Array) {
    if (data.length !== elements) throw invalid(`${field} data`, `has ${data.length} values, shape [${shape}] needs ${elements}`);
    return { name: tensor.name, shape, type, bytes: quantize(type, data) };
  }
  if (data.length !== expectedBytes) {
    throw invalid(`${field} data`, `has ${data.length} bytes, ${info.name} [${shape}] needs ${expectedBytes}`);
  }
  return { name: tensor.name, shape, type, bytes: data };
}

// ---- metadata values ----

const INTEGER_RANGES: ReadonlyMap<GgufValueType, [number, number]> = new Map([
  [GgufValueType.UINT8, [0, 0xff]],
  [GgufValueType.INT8, [-0x80, 0x7f]],
  [GgufValueType.UINT16, [0, 0xffff]],
  [GgufValueType.INT16, [-0x8000, 0x7fff]],
  [GgufValueType.UINT32, [0, 0xffffffff]],
  [GgufValueType.INT32, [-0x80000000, 0x7fffffff]],
]);

const TYPED_ARRAY_ITEM_TYPES: ReadonlyArray<[new (length: number) => ArrayBufferView, GgufValueType]> = [
  [Uint8Array, GgufValueType.UINT8],
  [Int8Array, GgufValueType.INT8],
  [Uint16Array, GgufValueType.UINT16],
  [Int16Array, GgufValueType.INT16],
  [Uint32Array, GgufValueType.UINT32],
  [Int32Array, GgufValueType.INT32],
  [Float32Array, GgufValueType.FLOAT32],
  [Float64Array, GgufValueType.FLOAT64],
  [BigUint64Array, GgufValueType.UINT64],
  [BigInt64Array, GgufValueType.INT64],
];

function isGgufValue(input: GgufValueInput): input is GgufValue {
  return typeof input === "object" && !Array.isArray(input) && !ArrayBuffer.isView(input) && "type" in input;
}

function toGgufValue(input: GgufValueInput, field: string): GgufValue {
  if (isGgufValue(input)) return checkExplicit(input, field);
  switch (typeof input) {
    case "string":
      return { type: GgufValueType.STRING, value: input };
    case "boolean":
      return { type: GgufValueType.BOOL, value: input };
    case "bigint":
      return checkExplicit({ type: input >= 0n ? GgufValueType.UINT64 : GgufValueType.INT64, value: input }, field);
    case "number":
      return inferNumber(input, field);
  }
  if (input instanceof PackedStrings) return { type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: input };
  if (ArrayBuffer.isView(input)) {
    const itemType = TYPED_ARRAY_ITEM_TYPES.find(([kind]) => input instanceof kind)?.[1];
    if (itemType === undefined) throw invalid(field, "unsupported typed array kind");
    return { type: GgufValueType.ARRAY, itemType, value: input };
  }
  return inferArray(input as unknown[], field);
}

function inferNumber(value: number, field: string): GgufValue {
  if (!Number.isInteger(value)) return { type: GgufValueType.FLOAT32, value };
  if (value >= 0 && value <= 0xffffffff) return { type: GgufValueType.UINT32, value };
  if (value < 0 && value >= -0x80000000) return { type: GgufValueType.INT32, value };
  if (!Number.isSafeInteger(value)) throw invalid(field, `${value} is beyond the exact integer range; pass a bigint`);
  return { type: value >= 0 ? GgufValueType.UINT64 : GgufValueType.INT64, value: BigInt(value) };
}

function inferArray(items: unknown[], field: string): GgufArray {
  if (items.length === 0) throw invalid(field, "an empty array has no item type; pass { type: ARRAY, itemType, value }");
  if (items.every((item) => typeof item === "string")) return { type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: items };
  if (items.every((item) => typeof item === "boolean")) return { type: GgufValueType.ARRAY, itemType: GgufValueType.BOOL, value: items };
  if (items.every((item) => typeof item === "number")) {
    const numbers = items as number[];
    const allInt32 = numbers.every((n) => Number.isInteger(n) && n >= -0x80000000 && n <= 0x7fffffff);
    return allInt32
      ? { type: GgufValueType.ARRAY, itemType: GgufValueType.INT32, value: Int32Array.from(numbers) }
      : { type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value: Float32Array.from(numbers) };
  }
  throw invalid(field, "an array must hold only strings, only booleans or only numbers");
}

/** Checks an explicitly typed value against its type (ranges, item kinds). */
function checkExplicit(value: GgufValue, field: string): GgufValue {
  const range = INTEGER_RANGES.get(value.type);
  if (range) {
    const n = value.value as unknown;
    if (typeof n !== "number" || !Number.isInteger(n) || n < range[0] || n > range[1]) {
      throw invalid(field, `${String(n)} does not fit ${valueTypeName(value.type)}`);
    }
    return value;
  }
  switch (value.type) {
    case GgufValueType.FLOAT32:
    case GgufValueType.FLOAT64:
      if (typeof (value.value as unknown) !== "number") throw invalid(field, `${valueTypeName(value.type)} needs a number`);
      return value;
    case GgufValueType.UINT64:
    case GgufValueType.INT64: {
      const n = value.value as unknown;
      const big = typeof n === "number" && Number.isSafeInteger(n) ? BigInt(n) : n;
      const fits =
        typeof big === "bigint" &&
        (value.type === GgufValueType.UINT64 ? BigInt.asUintN(64, big) === big : BigInt.asIntN(64, big) === big);
      if (!fits) throw invalid(field, `${String(n)} does not fit ${valueTypeName(value.type)}`);
      return { type: value.type, value: big };
    }
    case GgufValueType.BOOL:
      if (typeof (value.value as unknown) !== "boolean") throw invalid(field, "BOOL needs a boolean");
      return value;
    case GgufValueType.STRING:
      if (typeof (value.value as unknown) !== "string") throw invalid(field, "STRING needs a string");
      return value;
    case GgufValueType.ARRAY:
      return checkArray(value, field);
  }
  throw invalid(field, `unknown value type ${String((value as { type: unknown }).type)}`);
}

function checkArray(array: GgufArray, field: string): GgufArray {
  const { itemType } = array;
  const items = array.value as unknown;
  const typedKind = TYPED_ARRAY_ITEM_TYPES.find(([, type]) => type === itemType)?.[0];
  if (typedKind) {
    if (items instanceof typedKind) return array;
    // A plain array of numbers for a numeric item type: check each item and pack it.
    if (!Array.isArray(items)) throw invalid(field, `ARRAY of ${valueTypeName(itemType)} needs a ${typedKind.name} or an array`);
    items.forEach((item, i) => checkExplicit({ type: itemType, value: item } as GgufValue, `${field}[${i}]`));
    const packed = new typedKind(items.length) as unknown as { [i: number]: unknown };
    items.forEach((item, i) => (packed[i] = typeof item === "number" && itemType >= GgufValueType.UINT64 && itemType <= GgufValueType.INT64 ? BigInt(item) : item));
    return { type: GgufValueType.ARRAY, itemType, value: packed as unknown as GgufArrayItems };
  }
  if (itemType === GgufValueType.STRING && items instanceof PackedStrings) return array;
  if (!Array.isArray(items)) throw invalid(field, `ARRAY of ${valueTypeName(itemType)} needs an array`);
  const expected = itemType === GgufValueType.STRING ? "string" : itemType === GgufValueType.BOOL ? "boolean" : undefined;
  if (expected) {
    const bad = items.findIndex((item) => typeof item !== expected);
    if (bad >= 0) throw invalid(`${field}[${bad}]`, `ARRAY of ${valueTypeName(itemType)} needs ${expected} items`);
    return array;
  }
  if (itemType === GgufValueType.ARRAY) {
    return { type: GgufValueType.ARRAY, itemType, value: items.map((item, i) => checkArray(item as GgufArray, `${field}[${i}]`)) };
  }
  throw invalid(field, `unknown array item type ${itemType}`);
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case GgufValueType.STRING:
      return sink.string(value.value);
    case GgufValueType.BOOL:
      return sink.u8(value.value ? 1 : 0);
    case GgufValueType.ARRAY:
      return writeArray(sink, value);
  }
  writeNumbers(sink, value.type, [value.value]);
}

function writeArray(sink: ByteSink, array: GgufArray): void {
  sink.u32(array.itemType);
  sink.u64(array.value.length);
  switch (array.itemType) {
    case GgufValueType.STRING:
      if (array.value instanceof PackedStrings) {
        for (let i = 0; i < array.value.length; i++) sink.stringBytes(array.value.bytesOf(i));
      } else {
        for (const item of array.value as string[]) sink.string(item);
      }
      return;
    case GgufValueType.BOOL:
      for (const item of array.value as boolean[]) sink.u8(item ? 1 : 0);
      return;
    case GgufValueType.ARRAY:
      for (const item of array.value as GgufArray[]) writeArray(sink, item);
      return;
  }
  writeNumbers(sink, array.itemType, array.value as ArrayLike<number | bigint>);
}

function writeNumbers(sink: ByteSink, type: GgufValueType, items: ArrayLike<number | bigint>): void {
  const kind = TYPED_ARRAY_ITEM_TYPES.find(([, itemType]) => itemType === type)![0];
  const packed = new kind(items.length) as unknown as { [i: number]: number | bigint; buffer: ArrayBufferLike; byteLength: number };
  for (let i = 0; i < items.length; i++) packed[i] = items[i]!;
  // Typed arrays hold host byte order; GGUF is little-endian, as is every host Node runs on in practice.
  sink.bytes(new Uint8Array(packed.buffer, 0, packed.byteLength));
}
