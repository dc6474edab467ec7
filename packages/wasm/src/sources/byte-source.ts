/**
 * One model file's bytes from a URL, a Blob or memory, read once into memory the caller allocates
 * (the kernels' own, so a model of gigabytes is never held twice). The first bytes are looked at
 * before anything is allocated, so a file that is not a model fails cheaply.
 */
import { InferenceError, type ModelBlob } from "@infer/core";
import type { BufferAllocator } from "../platform/types.js";
import { openDownload, type ProgressListener } from "./download.js";

export interface ByteSource {
  /** The URL or file, for messages. */
  readonly label: string;
  /** The whole size, known before reading. */
  readonly size: number;
  /** The first bytes (up to a few KiB), read before any allocation. */
  readonly head: Uint8Array;
  /**
   * Reads every byte into `allocate(size)` (default: a new array) and returns that buffer; hands
   * it back with `release` when reading fails.
   */
  readAll(allocate?: BufferAllocator, release?: (view: Uint8Array) => void): Promise<Uint8Array>;
  /** Gives up without reading (a download's connection is dropped). */
  cancel?(): void;
}

const fresh: BufferAllocator = (byteLength) => new Uint8Array(byteLength);

/** Bytes a Blob is read in: large enough to cost few calls, small enough not to double a model's memory. */
const BLOB_SLICE_BYTES = 16 * 2 ** 20;
const HEAD_BYTES = 4096;

async function readBlob(blob: ModelBlob, start: number, end: number, label: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await blob.slice(start, end).arrayBuffer());
  } catch (cause) {
    throw new InferenceError("IO", `${label}: cannot read the file's bytes ${start}-${end}`, { cause, details: { file: label } });
  }
}

/** `label` names the bytes in messages (default: the File's name). */
export async function blobSource(blob: ModelBlob, onProgress?: ProgressListener, label = blob.name ?? `Blob (${blob.size} bytes)`): Promise<ByteSource> {
  const head = await readBlob(blob, 0, Math.min(blob.size, HEAD_BYTES), label);
  return {
    label,
    size: blob.size,
    head,
    async readAll(allocate = fresh, release) {
      const bytes = allocate(blob.size);
      try {
        for (let at = 0; at < blob.size; at += BLOB_SLICE_BYTES) {
          const end = Math.min(blob.size, at + BLOB_SLICE_BYTES);
          bytes.set(await readBlob(blob, at, end, label), at);
          onProgress?.({ phase: "load", loadedBytes: end, totalBytes: blob.size });
        }
      } catch (error) {
        release?.(bytes);
        throw error;
      }
      return bytes;
    },
  };
}

export function memorySource(data: ArrayBuffer | ArrayBufferView, onProgress?: ProgressListener): ByteSource {
  const view = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return {
    label: `${view.byteLength} bytes in memory`,
    size: view.byteLength,
    head: view.subarray(0, HEAD_BYTES),
    async readAll(allocate) {
      // Without memory of its own to go to, the caller's array is used as it is: no copy.
      const bytes = allocate ? allocate(view.byteLength) : view;
      if (bytes !== view) bytes.set(view);
      onProgress?.({ phase: "load", loadedBytes: view.byteLength, totalBytes: view.byteLength });
      return bytes;
    },
  };
}

export async function urlSource(url: string, onProgress?: ProgressListener, signal?: AbortSignal): Promise<ByteSource> {
  const download = await openDownload(url, { onProgress, signal });
  const head = await download.peek(HEAD_BYTES);
  return {
    label: url,
    size: download.size,
    head,
    cancel: () => download.cancel(),
    async readAll(allocate = fresh, release) {
      const bytes = allocate(download.size);
      try {
        await download.readInto(bytes);
      } catch (error) {
        release?.(bytes);
        throw error;
      }
      return bytes;
    },
  };
}
