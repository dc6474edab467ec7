/**
 * GGUF metadata values, kept with their stored type so a file read and
 * written back keeps every key's exact type, plus typed getters that fail
 * with MODEL_FORMAT naming the file and key.
 */
import { InferenceError } from "@infer/core";
import { PackedStrings } from "./packed-strings.js";

/** Metadata value type ids, as stored in GGUF. */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type GgufNumberType =
  | GgufValueType.UINT8
  | GgufValueType.INT8
  | GgufValueType.UINT16
  | GgufValueType.INT16
  | GgufValueType.UINT32
  | GgufValueType.INT32
  | GgufValueType.FLOAT32
  | GgufValueType.FLOAT64;

export type GgufBigIntType = GgufValueType.UINT64 | GgufValueType.INT64;

/**
 * Array items: numeric arrays as the matching typed array, strings as read
 * from a file packed as their bytes (a writer also takes a string[]).
 */
export type GgufArrayItems =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array
  | boolean[]
  | PackedStrings
  | string[]
  | GgufArray[];

export interface GgufArray {
  type: GgufValueType.ARRAY;
  itemType: GgufValueType;
  value: GgufArrayItems;
}

export type GgufValue =
  | { type: GgufNumberType; value: number }
  | { type: GgufBigIntType; value: bigint }
  | { type: GgufValueType.BOOL; value: boolean }
  | { type: GgufValueType.STRING; value: string }
  | GgufArray;

/** Byte size of each fixed-size value type. */
export const GGUF_SCALAR_BYTES: ReadonlyMap<GgufValueType, number> = new Map([
  [GgufValueType.UINT8, 1],
  [GgufValueType.INT8, 1],
  [GgufValueType.UINT16, 2],
  [GgufValueType.INT16, 2],
  [GgufValueType.UINT32, 4],
  [GgufValueType.INT32, 4],
  [GgufValueType.FLOAT32, 4],
  [GgufValueType.BOOL, 1],
  [GgufValueType.UINT64, 8],
  [GgufValueType.INT64, 8],
  [GgufValueType.FLOAT64, 8],
]);

export function valueTypeName(type: number): string {
  return GgufValueType[type] ?? `type#${type}`;
}

/** The metadata of one GGUF file: a Map that knows which file it came from. */
export class GgufMetadata extends Map<string, GgufValue> {
  constructor(readonly source: string) {
    super();
  }
}

type MetadataLike = ReadonlyMap<string, GgufValue>;

function sourceOf(meta: MetadataLike): string {
  return meta instanceof GgufMetadata ? meta.source : "<metadata>";
}

function metadataError(meta: MetadataLike, key: string, problem: string): InferenceError {
  const file = sourceOf(meta);
  return new InferenceError("MODEL_FORMAT", `${file}: metadata key "${key}" ${problem}`, { details: { file, field: key } });
}

function lookup(meta: MetadataLike, key: string, required: boolean): GgufValue | undefined {
  const value = meta.get(key);
  if (value === undefined && required) throw metadataError(meta, key, "is missing");
  return value;
}

function wrongType(meta: MetadataLike, key: string, value: GgufValue, expected: string): InferenceError {
  const stored = value.type === GgufValueType.ARRAY ? `ARRAY of ${valueTypeName(value.itemType)}` : valueTypeName(value.type);
  return metadataError(meta, key, `has type ${stored}, expected ${expected}`);
}

export function getString(meta: MetadataLike, key: string, required: true): string;
export function getString(meta: MetadataLike, key: string, required?: boolean): string | undefined;
export function getString(meta: MetadataLike, key: string, required = false): string | undefined {
  const value = lookup(meta, key, required);
  if (value === undefined) return undefined;
  if (value.type !== GgufValueType.STRING) throw wrongType(meta, key, value, "STRING");
  return value.value;
}

/** Any numeric type; 64-bit integers only when they fit a double exactly. */
export function getNumber(meta: MetadataLike, key: string, required: true): number;
export function getNumber(meta: MetadataLike, key: string, required?: boolean): number | undefined;
export function getNumber(meta: MetadataLike, key: string, required = false): number | undefined {
  const value = lookup(meta, key, required);
  if (value === undefined) return undefined;
  if (typeof value.value === "number") return value.value;
  if (typeof value.value === "bigint") {
    const asNumber = Number(value.value);
    if (!Number.isSafeInteger(asNumber)) throw metadataError(meta, key, `holds ${value.value}, beyond the exact range of a number`);
    return asNumber;
  }
  throw wrongType(meta, key, value, "a number");
}

export function getBoolean(meta: MetadataLike, key: string, required: true): boolean;
export function getBoolean(meta: MetadataLike, key: string, required?: boolean): boolean | undefined;
export function getBoolean(meta: MetadataLike, key: string, required = false): boolean | undefined {
  const value = lookup(meta, key, required);
  if (value === undefined) return undefined;
  if (value.type !== GgufValueType.BOOL) throw wrongType(meta, key, value, "BOOL");
  return value.value;
}

export function getArray(meta: MetadataLike, key: string, required: true): GgufArray;
export function getArray(meta: MetadataLike, key: string, required?: boolean): GgufArray | undefined;
export function getArray(meta: MetadataLike, key: string, required = false): GgufArray | undefined {
  const value = lookup(meta, key, required);
  if (value === undefined) return undefined;
  if (value.type !== GgufValueType.ARRAY) throw wrongType(meta, key, value, "ARRAY");
  return value;
}

/** An array of strings, packed as their bytes (see PackedStrings). */
export function getStringArray(meta: MetadataLike, key: string, required: true): PackedStrings;
export function getStringArray(meta: MetadataLike, key: string, required?: boolean): PackedStrings | undefined;
export function getStringArray(meta: MetadataLike, key: string, required = false): PackedStrings | undefined {
  const array = getArray(meta, key, required);
  if (array === undefined) return undefined;
  if (array.itemType !== GgufValueType.STRING) throw wrongType(meta, key, array, "ARRAY of STRING");
  return array.value instanceof PackedStrings ? array.value : PackedStrings.fromStrings(array.value as string[]);
}

/** A numeric array as numbers (typed arrays as stored; 64-bit items converted when exact). */
export function getNumberArray(meta: MetadataLike, key: string, required: true): ArrayLike<number>;
export function getNumberArray(meta: MetadataLike, key: string, required?: boolean): ArrayLike<number> | undefined;
export function getNumberArray(meta: MetadataLike, key: string, required = false): ArrayLike<number> | undefined {
  const array = getArray(meta, key, required);
  if (array === undefined) return undefined;
  const items = array.value;
  if (items instanceof BigInt64Array || items instanceof BigUint64Array) {
    const numbers = Array.from(items, Number);
    if (!numbers.every(Number.isSafeInteger)) throw metadataError(meta, key, "holds 64-bit items beyond the exact range of a number");
    return numbers;
  }
  if (ArrayBuffer.isView(items)) return items as ArrayLike<number>;
  throw wrongType(meta, key, array, "a numeric ARRAY");
}
