// Encoders: exact bytes for hand-worked blocks, and quantize -> dequantize
// within stated per-type error bounds on varied data.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CODEC_TYPES,
  GgmlType,
  bf16ToF32,
  dequantize,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  quantize,
  scaleMinK4,
  typeName,
} from "../src/index.js";
import { assertInferenceError } from "./helpers.js";
import { seededRandom } from "@infer/core/testing";

/** 1024 values: smooth, noisy, outliers, an all-zero and a constant and an all-negative stretch. */
function testValues(): Float32Array {
  const next = seededRandom(7);
  const x = new Float32Array(1024);
  for (let i = 0; i < 1024; i++) x[i] = Math.sin(i / 7) * 0.5 + (next() - 0.5) * 0.2;
  for (let i = 0; i < 1024; i += 61) x[i] = (next() - 0.5) * 20;
  x.fill(0, 256, 288);
  x.fill(0.3, 288, 320);
  for (let i = 512; i < 768; i++) x[i] = -1 - next();
  return x;
}

// Relative rounding error of an f16 scale; a bound of n levels allows n + 1 of it (the
// rounded d also scales the half step).
const F16_EPS = 2 ** -11;

describe("half floats", () => {
  it("round f32 to f16 to nearest, ties to even, with subnormals and overflow", () => {
    assert.equal(f32ToF16(1), 0x3c00);
    assert.equal(f32ToF16(-2), 0xc000);
    assert.equal(f32ToF16(1 + 2 ** -11), 0x3c00); // tie: stays even
    assert.equal(f32ToF16(1 + 3 * 2 ** -11), 0x3c02); // tie: rounds up to even
    assert.equal(f32ToF16(1 + 2 ** -11 + 2 ** -20), 0x3c01);
    assert.equal(f32ToF16(65504), 0x7bff);
    assert.equal(f32ToF16(65519), 0x7bff);
    assert.equal(f32ToF16(65520), 0x7c00); // tie between 65504 and 2^16 -> even -> infinity
    assert.equal(f32ToF16(2 ** -24), 0x0001);
    assert.equal(f32ToF16(2 ** -25), 0x0000); // tie -> even (zero)
    assert.equal(f32ToF16(3 * 2 ** -26), 0x0001);
    assert.equal(f32ToF16(2 ** -14 - 2 ** -25), 0x0400); // rounds up out of the subnormals
    assert.equal(f32ToF16(-0), 0x8000);
    assert.equal(f32ToF16(-Infinity), 0xfc00);
    const nan = f32ToF16(NaN);
    assert.equal(nan & 0x7c00, 0x7c00);
    assert.notEqual(nan & 0x3ff, 0);
  });

  it("every finite f16 survives f16 -> f32 -> f16", () => {
    for (let h = 0; h < 65536; h++) {
      if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue; // NaN payloads
      assert.equal(f32ToF16(f16ToF32(h)), h, `f16 0x${h.toString(16)}`);
    }
  });

  it("round f32 to bf16 to nearest, ties to even", () => {
    assert.equal(f32ToBf16(1), 0x3f80);
    assert.equal(f32ToBf16(1 + 2 ** -8), 0x3f80);
    assert.equal(f32ToBf16(1 + 3 * 2 ** -8), 0x3f82);
    assert.equal(f32ToBf16(1 + 2 ** -8 + 2 ** -20), 0x3f81);
    assert.equal(f32ToBf16(-5), 0xc0a0);
    assert.ok(Number.isNaN(bf16ToF32(f32ToBf16(NaN))));
    assert.equal(bf16ToF32(0x3eab), 0.333984375);
  });
});

describe("reference quantizers give ggml's bytes", () => {
  it("Q8_0: d = amax / 127, q = round half away from zero", () => {
    const x = new Float32Array(32);
    x.set([127, -2.5, 2.5, 0.49, -0.5]); // amax 127 -> d = 1 exactly
    const bytes = quantize(GgmlType.Q8_0, x);
    assert.deepEqual(Array.from(bytes.subarray(0, 7)), [0x00, 0x3c, 127, 0xfd, 3, 0, 0xff]);
    assert.ok(bytes.subarray(7).every((b) => b === 0));
  });

  it("Q4_0: d = max / -8 with max the signed value of largest magnitude", () => {
    const x = Float32Array.from({ length: 32 }, (_, j) => j - 16); // max = -16 -> d = 2
    const bytes = quantize(GgmlType.Q4_0, x);
    assert.equal(bytes[0], 0x00);
    assert.equal(bytes[1], 0x40); // f16 2.0
    assert.equal(bytes[2], 0x80); // x = -16 -> 0, x = 0 -> 8
    assert.equal(bytes[3], 0x91); // x = -15 -> trunc(1.0) = 1, x = 1 -> 9
    assert.equal(bytes[17], 0xf8); // x = -1 -> 8, x = 15 -> 16 clamped to 15
  });

  it("Q5_0: integer inputs with d = 1 encode exactly, fifth bits in qh", () => {
    const x = Float32Array.from({ length: 32 }, (_, j) => j - 16); // max = -16 -> d = 1, q = j
    const bytes = quantize(GgmlType.Q5_0, x);
    assert.deepEqual(Array.from(bytes.subarray(0, 6)), [0x00, 0x3c, 0x00, 0x00, 0xff, 0xff]);
    for (let j = 0; j < 16; j++) assert.equal(bytes[6 + j], j | (j << 4));
    assert.deepEqual(Array.from(dequantize(GgmlType.Q5_0, bytes, 32)), Array.from(x));
  });

  it("rejects counts that are not whole blocks", () => {
    assertInferenceError(() => quantize(GgmlType.Q4_K, new Float32Array(100)), "INVALID_OPTION", ["Q4_K", "100", "256"]);
  });
});

/** The worst error allowed for one 32-element block of a legacy type, from its stored d (and m). */
function legacyBound(type: GgmlType, block: Uint8Array, clampedSide: boolean): number {
  const d = Math.abs(f16ToF32(block[0]! | (block[1]! << 8)));
  const m = type === GgmlType.Q4_1 || type === GgmlType.Q5_1 ? Math.abs(f16ToF32(block[2]! | (block[3]! << 8))) : 0;
  switch (type) {
    case GgmlType.Q8_0:
      return d * (0.5 + 128 * F16_EPS);
    case GgmlType.Q4_0: // the opposite extreme can clip from level 16 to 15: one full step
      return d * ((clampedSide ? 1 : 0.5) + 9 * F16_EPS);
    case GgmlType.Q5_0:
      return d * ((clampedSide ? 1 : 0.5) + 17 * F16_EPS);
    case GgmlType.Q4_1:
      return d * (0.5 + 16 * F16_EPS) + m * F16_EPS;
    case GgmlType.Q5_1:
      return d * (0.5 + 32 * F16_EPS) + m * F16_EPS;
  }
  throw new Error(`no bound for ${typeName(type)}`);
}

describe("quantize -> dequantize error bounds", () => {
  const x = testValues();
  const tolerance = 1e-6; // f32 arithmetic in the decoder

  it("F32 is exact; F16 and BF16 are within half a unit in the last place", () => {
    assert.deepEqual(dequantize(GgmlType.F32, quantize(GgmlType.F32, x), x.length), x);
    const f16 = dequantize(GgmlType.F16, quantize(GgmlType.F16, x), x.length);
    const bf16 = dequantize(GgmlType.BF16, quantize(GgmlType.BF16, x), x.length);
    for (let i = 0; i < x.length; i++) {
      assert.ok(Math.abs(f16[i]! - x[i]!) <= Math.max(Math.abs(x[i]!) * 2 ** -11, 2 ** -25), `f16 element ${i}`);
      assert.ok(Math.abs(bf16[i]! - x[i]!) <= Math.abs(x[i]!) * 2 ** -8, `bf16 element ${i}`);
    }
  });

  for (const type of [GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1]) {
    it(`${typeName(type)}: within half a step (a full step where ggml's reference clips)`, () => {
      const bytes = quantize(type, x);
      const y = dequantize(type, bytes, x.length);
      const blockBytes = bytes.length / (x.length / 32);
      for (let b = 0; b < x.length / 32; b++) {
        const block = bytes.subarray(b * blockBytes, (b + 1) * blockBytes);
        let max = 0;
        for (let j = 0; j < 32; j++) if (Math.abs(x[b * 32 + j]!) > Math.abs(max)) max = x[b * 32 + j]!;
        for (let j = 0; j < 32; j++) {
          const i = b * 32 + j;
          const d = Math.abs(f16ToF32(block[0]! | (block[1]! << 8)));
          const clampedSide = Math.abs(x[i]! + max) <= d; // near -max, the level past the top
          const bound = legacyBound(type, block, clampedSide) + tolerance;
          assert.ok(Math.abs(y[i]! - x[i]!) <= bound, `${typeName(type)} element ${i}: ${x[i]} -> ${y[i]}, bound ${bound}`);
        }
      }
    });
  }

  for (const [type, levels] of [
    [GgmlType.Q4_K, 15],
    [GgmlType.Q5_K, 31],
  ] as const) {
    it(`${typeName(type)}: within half of each sub-block's step, and the steps are tight`, () => {
      const bytes = quantize(type, x);
      const y = dequantize(type, bytes, x.length);
      const blockBytes = type === GgmlType.Q4_K ? 144 : 176;
      for (let b = 0; b < x.length / 256; b++) {
        const block = bytes.subarray(b * blockBytes, (b + 1) * blockBytes);
        const view = new DataView(bytes.buffer, b * blockBytes, blockBytes);
        const d = f16ToF32(view.getUint16(0, true));
        const dmin = f16ToF32(view.getUint16(2, true));
        for (let s = 0; s < 8; s++) {
          const { scale } = scaleMinK4(block, 4, s);
          const step = d * scale;
          const values = x.subarray(b * 256 + s * 32, b * 256 + s * 32 + 32);
          const low = Math.min(0, ...values);
          const high = Math.max(...values);
          // Rounding the scale and min up costs at most one unit of d and dmin.
          assert.ok(step <= (high - low + dmin) / levels + d + tolerance, `${typeName(type)} block ${b} sub-block ${s} step ${step}`);
          for (let l = 0; l < 32; l++) {
            const i = b * 256 + s * 32 + l;
            assert.ok(Math.abs(y[i]! - x[i]!) <= step / 2 + tolerance, `${typeName(type)} element ${i}: ${x[i]} -> ${y[i]}`);
          }
        }
      }
    });
  }

  it("Q6_K: within half of each 16-element sub-block's step, and the steps are tight", () => {
    const bytes = quantize(GgmlType.Q6_K, x);
    const y = dequantize(GgmlType.Q6_K, bytes, x.length);
    for (let b = 0; b < x.length / 256; b++) {
      const view = new DataView(bytes.buffer, b * 210, 210);
      const d = f16ToF32(view.getUint16(208, true));
      for (let s = 0; s < 16; s++) {
        const step = Math.abs(d * view.getInt8(192 + s));
        const values = x.subarray(b * 256 + s * 16, b * 256 + s * 16 + 16);
        const amax = Math.max(...Array.from(values, Math.abs));
        assert.ok(step <= amax / 31 + d + tolerance, `Q6_K block ${b} sub-block ${s} step ${step}`);
        for (let l = 0; l < 16; l++) {
          const i = b * 256 + s * 16 + l;
          assert.ok(Math.abs(y[i]! - x[i]!) <= step / 2 + tolerance, `Q6_K element ${i}: ${x[i]} -> ${y[i]}`);
        }
      }
    }
  });

  it("every codec type encodes zeros as zeros", () => {
    for (const type of CODEC_TYPES) {
      const y = dequantize(type, quantize(type, new Float32Array(256)), 256);
      assert.ok(y.every((v) => v === 0), typeName(type));
    }
  });
});
