import { open } from "node:fs/promises";
import { InferenceError } from "@infer/core";

/** Provides the buffer a file is read into, given its size in bytes (e.g. a view of the kernels' memory). */
export type FileBufferAllocator = (byteLength: number) => Uint8Array;

/**
 * Reads a whole file into one Uint8Array. Reads in chunks rather than with
 * readFile, which refuses files over 2 GiB; model files are often larger.
 * With `allocate`, the bytes land in the buffer it returns (so a model file can
 * be read straight into the memory the kernels compute on, with no second copy).
 */
export async function readWholeFile(path: string, what: string, allocate?: FileBufferAllocator): Promise<Uint8Array> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new InferenceError(
      code === "ENOENT" ? "MODEL_NOT_FOUND" : "MODEL_FORMAT",
      `${path}: cannot open the ${what} file (${code ?? String(error)})`,
      { cause: error, details: { file: path } },
    );
  }
  try {
    const { size } = await handle.stat();
    const bytes = allocate ? allocate(size) : new Uint8Array(size);
    if (bytes.byteLength !== size) {
      throw new InferenceError("INTERNAL", `${path}: the buffer for the ${what} file holds ${bytes.byteLength} bytes, not ${size}`);
    }
    const chunk = 1 << 30;
    for (let done = 0; done < size; ) {
      const { bytesRead } = await handle.read(bytes, done, Math.min(chunk, size - done), done);
      if (bytesRead === 0) throw new InferenceError("MODEL_FORMAT", `${path}: the file shrank while being read`, { details: { file: path } });
      done += bytesRead;
    }
    return bytes;
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
