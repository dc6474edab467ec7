import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { InferenceError, type ErrorCode } from "@infer/core";

/** /work/shared/models seen from packages/formats/dist/test/*.test.js. */
export const SHARED_MODELS = fileURLToPath(new URL("../../../../../shared/models/", import.meta.url));

/** A skip reason when the shared models folder is absent (a fresh clone has no ../shared). */
export function sharedModelsSkip(): string | false {
  return existsSync(SHARED_MODELS) ? false : `shared models folder ${SHARED_MODELS} is absent`;
}

/** Asserts `run` throws an InferenceError with `code` whose message names each of `mentions`. */
export function assertInferenceError(run: () => unknown, code: ErrorCode, mentions: string[]): InferenceError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof InferenceError, `expected an InferenceError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  for (const text of mentions) assert.ok(caught.message.includes(text), `"${caught.message}" should mention "${text}"`);
  return caught;
}

export async function assertRejectsWith(run: () => Promise<unknown>, code: ErrorCode, mentions: string[]): Promise<void> {
  await assert.rejects(run, (error: unknown) => {
    assert.ok(error instanceof InferenceError, `expected an InferenceError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    for (const text of mentions) assert.ok(error.message.includes(text), `"${error.message}" should mention "${text}"`);
    return true;
  });
}

/**
 * Builds raw little-endian bytes by hand, so tests can write headers (valid or
 * deliberately broken) without going through the writer under test.
 */
export class ByteBuilder {
  private readonly parts: number[] = [];

  u8(...values: number[]): this {
    for (const v of values) this.parts.push(v & 0xff);
    return this;
  }
  u16(value: number): this {
    return this.u8(value, value >> 8);
  }
  u32(value: number): this {
    for (let i = 0; i < 4; i++) this.parts.push(Math.floor(value / 2 ** (8 * i)) & 0xff);
    return this;
  }
  u64(value: bigint | number): this {
    const big = BigInt(value);
    for (let i = 0n; i < 8n; i++) this.parts.push(Number((big >> (8n * i)) & 0xffn));
    return this;
  }
  f32(value: number): this {
    const bytes = new Uint8Array(new Float32Array([value]).buffer);
    return this.u8(...bytes);
  }
  /** GGUF string: u64 length + UTF-8 bytes. */
  str(text: string): this {
    const bytes = new TextEncoder().encode(text);
    return this.u64(bytes.length).u8(...bytes);
  }
  zeros(count: number): this {
    for (let i = 0; i < count; i++) this.parts.push(0);
    return this;
  }
  padTo(alignment: number): this {
    return this.zeros((alignment - (this.parts.length % alignment)) % alignment);
  }
  get length(): number {
    return this.parts.length;
  }
  bytes(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}
