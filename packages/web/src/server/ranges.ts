/** One byte range of a file, both ends inclusive (HTTP's convention). */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Reads a `Range: bytes=...` header against a file of `size` bytes: undefined when there is
 * none (or it is not about bytes: the whole file is sent), "unsatisfiable" for a range outside
 * the file (416). Only the first of several ranges is honoured: a model download asks for one.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | "unsatisfiable" | undefined {
  if (header === undefined) return undefined;
  const match = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*(,|$)/.exec(header.trim());
  if (!match) return undefined;
  const [, from = "", to = ""] = match;
  if (from === "" && to === "") return undefined;
  if (from === "") {
    // "bytes=-N": the last N bytes.
    const suffix = Number(to);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  const end = to === "" ? size - 1 : Math.min(Number(to), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { start, end };
}
