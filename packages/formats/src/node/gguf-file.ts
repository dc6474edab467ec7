/**
 * GGUF files read from disk: the whole file (into memory an allocator gives,
 * such as the kernels' own), the header alone, or the first metadata of a
 * bounded prefix.
 */
import { type FileHandle, writeFile } from "node:fs/promises";
import { InferenceError } from "@infer/core";
import {
  GGUF_PREAMBLE_BYTES,
  type GgufFile,
  type GgufHeader,
  type GgufTensorInfo,
  parseGguf,
  parseGgufHeader,
  parseGgufMetadataPrefix,
} from "../gguf.js";
import type { GgufMetadata } from "../gguf-values.js";
import { type GgufWriteSpec, writeGguf } from "../gguf-writer.js";
import { type FileBufferAllocator, readRange, readWholeFile, withOpenFile } from "./read-file.js";

/** The first bytes read for a header; a longer header is read again in prefixes four times as long. */
const FIRST_PREFIX_BYTES = 4 * 2 ** 20;

/**
 * Reads a GGUF file into memory once and parses it: into one new array, or
 * into `memory.allocate(size)` (a view of the kernels' memory, say). With
 * `memory.release` too, only the tensor data section goes there: the header
 * is read into an allocation of its own, parsed, and handed back before the
 * data is allocated, which an allocator that reuses the freed range first
 * then places on the very pages the header was read into. (An ordinary
 * array for the header would stay resident until V8's next full collection,
 * several MiB beside the weights.) `bytes` is then that section.
 */
export async function readGguf(
  path: string,
  memory: { allocate?: FileBufferAllocator; release?: (view: Uint8Array) => void } = {},
): Promise<GgufFile> {
  const { allocate, release } = memory;
  if (!allocate || !release) return parseGguf(await readWholeFile(path, "GGUF", allocate), path);
  return await withOpenFile(path, "GGUF", async (handle, size) => {
    const header = await readHeaderInto(handle, size, path, allocate, release);
    const bytes = allocate(size - header.dataOffset);
    try {
      await readRange(handle, bytes, header.dataOffset, path);
    } catch (error) {
      release(bytes);
      throw error;
    }
    const at = (info: GgufTensorInfo) => info.offset - header.dataOffset;
    return { ...header, bytes, tensorData: (info) => bytes.subarray(at(info), at(info) + info.byteLength) };
  });
}

/** The header, from prefixes of 4, 16, ... MiB, each read into `allocate(bytes)` and released after its parse. */
async function readHeaderInto(
  handle: FileHandle,
  size: number,
  path: string,
  allocate: FileBufferAllocator,
  release: (view: Uint8Array) => void,
): Promise<GgufHeader> {
  for (let prefixBytes = Math.min(size, FIRST_PREFIX_BYTES); ; prefixBytes = Math.min(size, prefixBytes * 4)) {
    const prefix = allocate(prefixBytes);
    let header: GgufHeader | undefined;
    try {
      await readRange(handle, prefix, 0, path);
      header = parseGgufHeader(prefix, size, path);
    } finally {
      release(prefix);
    }
    if (header) return header;
    if (prefixBytes === size) throw new InferenceError("INTERNAL", `${path}: the GGUF header parser asked for bytes past the whole file`);
  }
}

/**
 * Reads a GGUF file's header only: the metadata and tensor table, checked
 * against the file's size, without reading the tensor data (a tokenizer from
 * a model file of gigabytes reads a few megabytes).
 */
export async function readGgufHeader(path: string): Promise<GgufHeader> {
  return await withOpenFile(path, "GGUF", (handle, size) =>
    readHeaderInto(handle, size, path, (bytes) => new Uint8Array(bytes), () => undefined),
  );
}

/**
 * The metadata within the first `maxBytes` of a GGUF file (see
 * parseGgufMetadataPrefix), read without reading the rest: `complete` when
 * that was all of it. Errors name the file: MODEL_NOT_FOUND, MODEL_FORMAT.
 */
export async function readGgufMetadataPrefix(path: string, maxBytes: number): Promise<{ metadata: GgufMetadata; complete: boolean }> {
  return await withOpenFile(path, "GGUF", async (handle, size) => {
    // At least the preamble, so that the parse never asks for more: it reads the keys, or names what is wrong.
    const prefix = new Uint8Array(Math.min(size, Math.max(maxBytes, GGUF_PREAMBLE_BYTES)));
    await readRange(handle, prefix, 0, path);
    const read = parseGgufMetadataPrefix(prefix, size, path);
    if (!read) throw new InferenceError("INTERNAL", `${path}: the GGUF parser asked for more than the preamble`);
    return read;
  });
}

export async function writeGgufFile(path: string, spec: GgufWriteSpec): Promise<void> {
  await writeFile(path, writeGguf(spec));
}
