/**
 * UTF-8 decoding of bytes that may live in shared memory: a GGUF read straight into the kernels'
 * shared WebAssembly.Memory keeps its strings there. Browsers' TextDecoder refuses views of a
 * SharedArrayBuffer (Node's accepts them), so such a view is copied first; others decode in place.
 */
/** A TextDecoder (typed by its one method: lib ES2023 declares no TextDecoder type). */
export interface Utf8Decoder {
  decode(bytes?: Uint8Array, options?: { stream?: boolean }): string;
}

export function decodeUtf8(decoder: Utf8Decoder, bytes: Uint8Array, options?: { stream?: boolean }): string {
  return decoder.decode(bytes.buffer instanceof ArrayBuffer ? bytes : bytes.slice(), options);
}
