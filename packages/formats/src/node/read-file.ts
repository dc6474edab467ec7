import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { InferenceError } from "@infer/core";

/** Provides the buffer a file is read into, given its size in bytes (e.g. a view of the kernels' memory). */
export type FileBufferAllocator = (byteLength: number) => Uint8Array;

/**
 * Opening a named pipe for reading waits for a writer, forever if none comes: O_NONBLOCK opens it at
 * once, so the check below can refuse it (on regular files the flag changes nothing; Windows has none).
 */
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/**
 * Runs `work` on the open file and its size, naming the file in any error:
 * MODEL_NOT_FOUND when it is absent, MODEL_FORMAT when it cannot be read or
 * is not a regular file (a pipe, device or socket has no size to read).
 */
export async function withOpenFile<T>(path: string, what: string, work: (handle: FileHandle, size: number) => Promise<T>): Promise<T> {
  let handle;
  try {
    handle = await open(path, OPEN_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new InferenceError(
      code === "ENOENT" ? "MODEL_NOT_FOUND" : "MODEL_FORMAT",
      `${path}: cannot open the ${what} file (${code ?? String(error)})`,
      { cause: error, details: { file: path } },
    );
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) {
      throw new InferenceError("MODEL_FORMAT", `${path}: the ${what} file is not a regular file (a pipe, device or socket)`, {
        details: { file: path },
      });
    }
    return await work(handle, info.size);
  } catch (error) {
    if (error instanceof InferenceError) throw error;
    throw new InferenceError("MODEL_FORMAT", `${path}: cannot read the ${what} file: ${(error as Error).message}`, {
      cause: error,
      details: { file: path },
    });
  } finally {
    await handle.close();
  }
}

/**
 * Reads a whole file into one Uint8Array. Reads in chunks rather than with
 * readFile, which refuses files over 2 GiB; model files are often larger.
 * With `allocate`, the bytes land in the buffer it returns (so a model file can
 * be read straight into the memory the kernels compute on, with no second copy).
 */
export async function readWholeFile(path: string, what: string, allocate?: FileBufferAllocator): Promise<Uint8Array> {
  return await withOpenFile(path, what, async (handle, size) => {
    const bytes = allocate ? allocate(size) : new Uint8Array(size);
    if (bytes.byteLength !== size) {
      throw new InferenceError("INTERNAL", `${path}: the buffer for the ${what} file holds ${bytes.byteLength} bytes, not ${size}`);
    }
    await readRange(handle, bytes, 0, path);
    return bytes;
  });
}

/** Bytes per read call. */
const CHUNK_BYTES = 64 * 2 ** 20;
/**
 * Reads in flight at once. Reading into fresh memory is bound by page faults
 * as much as by copying; several reads fault pages on several of libuv's
 * threads at once, so a large file loads in a fraction of one read's time.
 */
const PARALLEL_READS = 4;

/** Fills `bytes` from the file's bytes at `fileOffset` on, chunk by chunk, a few chunks at a time. */
export async function readRange(handle: FileHandle, bytes: Uint8Array, fileOffset: number, path: string): Promise<void> {
  const size = bytes.byteLength;
  let next = 0;
  const reader = async (): Promise<void> => {
    while (next < size) {
      const start = next;
      const end = Math.min(size, start + CHUNK_BYTES);
      next = end;
      for (let done = start; done < end; ) {
        const { bytesRead } = await handle.read(bytes, done, end - done, fileOffset + done);
        if (bytesRead === 0) throw new InferenceError("MODEL_FORMAT", `${path}: the file shrank while being read`, { details: { file: path } });
        done += bytesRead;
      }
    }
  };
  await Promise.all(Array.from({ length: PARALLEL_READS }, reader));
}
