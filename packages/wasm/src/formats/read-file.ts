import { open } from "node:fs/promises";
import { InferenceError } from "@infer/core";

/**
 * Reads a whole file into one Uint8Array. Reads in chunks rather than with
 * readFile, which refuses files over 2 GiB; model files are often larger.
 */
export async function readWholeFile(path: string, what: string): Promise<Uint8Array> {
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
    const bytes = new Uint8Array(size);
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
