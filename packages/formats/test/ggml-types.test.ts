// Dequantization of blocks written byte by byte from ggml's block definitions,
// checked against values worked out by hand from the format's formulas.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GgmlType, dequantize, dequantizeRow, rowBytes, typeInfo } from "../src/index.js";
import { ByteBuilder, assertInferenceError } from "./helpers.js";

// f16 bit patterns used below.
const F16_ONE = 0x3c00;
const F16_HALF = 0x3800;
const F16_QUARTER = 0x3400;
const F16_EIGHTH = 0x3000;
const F16_MINUS_ONE = 0xbc00;

describe("ggml type layouts", () => {
  it("knows block sizes and bytes per block as ggml defines them, and the nominal bits", () => {
    const expected: [GgmlType, string, number, number, number][] = [
      [GgmlType.F32, "F32", 1, 4, 32],
      [GgmlType.F16, "F16", 1, 2, 16],
      [GgmlType.BF16, "BF16", 1, 2, 16],
      [GgmlType.Q4_0, "Q4_0", 32, 18, 4],
      [GgmlType.Q4_1, "Q4_1", 32, 20, 4],
      [GgmlType.Q5_0, "Q5_0", 32, 22, 5],
      [GgmlType.Q5_1, "Q5_1", 32, 24, 5],
      [GgmlType.Q8_0, "Q8_0", 32, 34, 8],
      [GgmlType.Q4_K, "Q4_K", 256, 144, 4],
      [GgmlType.Q5_K, "Q5_K", 256, 176, 5],
      [GgmlType.Q6_K, "Q6_K", 256, 210, 6],
    ];
    for (const [type, name, blockSize, bytesPerBlock, bits] of expected) {
      assert.deepEqual(typeInfo(type), { name, blockSize, bytesPerBlock, bits });
    }
    assert.equal(rowBytes(GgmlType.Q4_K, 512), 288);
    assert.equal(rowBytes(GgmlType.F16, 3), 6);
  });

  it("knows the sizes of the types it cannot decode, so files holding them parse (ggml-common.h's block structs)", () => {
    const sizes: [GgmlType, number, number][] = [
      [GgmlType.IQ2_XXS, 256, 2 + 64],
      [GgmlType.IQ3_S, 256, 2 + 104 + 4],
      [GgmlType.IQ4_XS, 256, 2 + 2 + 4 + 128],
      [GgmlType.IQ4_NL, 32, 2 + 16],
      [GgmlType.TQ1_0, 256, 2 + 4 + 48],
      [GgmlType.MXFP4, 32, 1 + 16],
      [GgmlType.NVFP4, 64, 4 + 32],
      [GgmlType.I64, 1, 8],
    ];
    for (const [type, blockSize, bytesPerBlock] of sizes) {
      assert.deepEqual([typeInfo(type).blockSize, typeInfo(type).bytesPerBlock], [blockSize, bytesPerBlock], GgmlType[type]);
      assertInferenceError(() => dequantize(type, new Uint8Array(bytesPerBlock), blockSize), "UNSUPPORTED_DTYPE", [GgmlType[type]!]);
    }
  });

  it("rejects rows that are not whole blocks and unknown type ids", () => {
    assertInferenceError(() => rowBytes(GgmlType.Q8_0, 33), "MODEL_FORMAT", ["Q8_0", "33"]);
    assertInferenceError(() => typeInfo(99 as GgmlType), "UNSUPPORTED_DTYPE", ["99"]);
    assertInferenceError(() => dequantize(GgmlType.Q2_K, new Uint8Array(84), 256), "UNSUPPORTED_DTYPE", ["Q2_K"]);
  });
});

describe("dequantize hand-written blocks", () => {
  it("F32, F16 and BF16", () => {
    const f32 = new ByteBuilder().u8(0x00, 0x00, 0xc0, 0x3f).u8(0x00, 0x00, 0x20, 0xc1).bytes(); // 1.5, -10
    assert.deepEqual(Array.from(dequantize(GgmlType.F32, f32, 2)), [1.5, -10]);
    const f16 = new ByteBuilder().u16(F16_ONE).u16(0xc000).u16(0x7bff).u16(0x0001).u16(0x7c00).u16(0x3555).bytes();
    assert.deepEqual(Array.from(dequantize(GgmlType.F16, f16, 6)), [1, -2, 65504, 2 ** -24, Infinity, 0.333251953125]);
    const bf16 = new ByteBuilder().u16(0x3f80).u16(0xc0a0).u16(0x3eab).bytes();
    assert.deepEqual(Array.from(dequantize(GgmlType.BF16, bf16, 3)), [1, -5, 0.333984375]);
  });

  it("Q4_0: y = d * (nibble - 8), low nibbles first", () => {
    const block = new ByteBuilder().u16(F16_HALF);
    for (let j = 0; j < 16; j++) block.u8(j | ((15 - j) << 4));
    const y = dequantize(GgmlType.Q4_0, block.bytes(), 32);
    assert.equal(y[0], -4); // (0 - 8) * 0.5
    assert.equal(y[15], 3.5); // (15 - 8) * 0.5
    assert.equal(y[16], 3.5); // high nibble of byte 0 is 15
    assert.equal(y[31], -4);
    for (let j = 0; j < 16; j++) {
      assert.equal(y[j], (j - 8) * 0.5);
      assert.equal(y[j + 16], (7 - j) * 0.5);
    }
  });

  it("Q4_1: y = d * nibble + m", () => {
    const block = new ByteBuilder().u16(F16_HALF).u16(F16_MINUS_ONE);
    for (let j = 0; j < 16; j++) block.u8(j | ((15 - j) << 4));
    const y = dequantize(GgmlType.Q4_1, block.bytes(), 32);
    assert.equal(y[0], -1);
    assert.equal(y[16], 6.5);
    for (let j = 0; j < 16; j++) {
      assert.equal(y[j], j * 0.5 - 1);
      assert.equal(y[j + 16], (15 - j) * 0.5 - 1);
    }
  });

  it("Q5_0: the fifth bit of element j is bit j of qh; y = d * (q - 16)", () => {
    const block = new ByteBuilder().u16(F16_QUARTER).u32(0x80000001).u8(0x0f);
    for (let j = 1; j < 16; j++) block.u8(0x88);
    const y = dequantize(GgmlType.Q5_0, block.bytes(), 32);
    assert.equal(y[0], 3.75); // (15 | 16) - 16 = 15, * 0.25
    assert.equal(y[16], -4); // high nibble 0, bit 16 clear: -16 * 0.25
    assert.equal(y[31], 2); // 8 | 16 = 24 -> 8 * 0.25
    for (let j = 1; j < 16; j++) assert.equal(y[j], -2); // 8 - 16
    for (let j = 17; j < 31; j++) assert.equal(y[j], -2);
  });

  it("Q5_1: y = d * q + m with the fifth bits in qh", () => {
    const block = new ByteBuilder().u16(F16_HALF).u16(F16_ONE).u32(0x00010002);
    for (let j = 0; j < 16; j++) block.u8(0x21);
    const y = dequantize(GgmlType.Q5_1, block.bytes(), 32);
    assert.equal(y[0], 1.5); // 1 * 0.5 + 1
    assert.equal(y[1], 9.5); // (1 | 16) * 0.5 + 1
    assert.equal(y[16], 10); // (2 | 16) * 0.5 + 1
    assert.equal(y[17], 2); // 2 * 0.5 + 1
    assert.equal(y[31], 2);
  });

  it("Q8_0: y = d * int8", () => {
    const block = new ByteBuilder().u16(F16_EIGHTH).u8(0x80); // -128
    for (let j = 1; j < 32; j++) block.u8((j - 16) & 0xff);
    const y = dequantize(GgmlType.Q8_0, block.bytes(), 32);
    assert.equal(y[0], -16);
    for (let j = 1; j < 32; j++) assert.equal(y[j], (j - 16) / 8);
  });

  // Sub-block scales sc = [1, 2, 3, 4, 5, 6, 7, 63] and mins mn = [0, 1, 2, 3, 4, 5, 6, 40],
  // packed by hand: bytes 0-3 sc0..3 (top bits: sc4..7 >> 4), bytes 4-7 mn0..3 (top bits:
  // mn4..7 >> 4), bytes 8-11 (sc & 15) | (mn & 15) << 4 for sub-blocks 4..7.
  const K4_SCALES = [1, 2, 3, 0x04 | (3 << 6), 0, 1, 2, 0x03 | (2 << 6), 0x45, 0x56, 0x67, 0x8f];

  it("Q4_K: 6-bit packed scales and mins, y = d * sc * q - dmin * mn", () => {
    const block = new ByteBuilder().u16(F16_ONE).u16(F16_HALF).u8(...K4_SCALES).u8(0xf0);
    for (let l = 1; l < 128; l++) block.u8(0x31); // low nibble 1 (even sub-blocks), high 3 (odd)
    assert.equal(block.length, 144);
    const y = dequantize(GgmlType.Q4_K, block.bytes(), 256);
    // Per sub-block: even use q = 1, odd q = 3.
    const expected = [1 * 1 - 0, 2 * 3 - 0.5, 3 * 1 - 1, 4 * 3 - 1.5, 5 * 1 - 2, 6 * 3 - 2.5, 7 * 1 - 3, 63 * 3 - 20];
    for (let s = 0; s < 8; s++) {
      for (let l = 0; l < 32; l++) {
        if (s * 32 + l === 0 || s * 32 + l === 32) continue;
        assert.equal(y[s * 32 + l], expected[s], `element ${s * 32 + l}`);
      }
    }
    assert.equal(y[0], 0); // byte 0 low nibble 0
    assert.equal(y[32], 2 * 15 - 0.5); // byte 0 high nibble 15
  });

  it("Q5_K: as Q4_K plus a fifth bit, sub-block s in bit s of qh[l]", () => {
    const block = new ByteBuilder().u16(F16_ONE).u16(F16_HALF).u8(...K4_SCALES);
    for (let l = 0; l < 32; l++) block.u8(0x81); // sub-blocks 0 and 7 get +16
    for (let l = 0; l < 128; l++) block.u8(0x31);
    assert.equal(block.length, 176);
    const y = dequantize(GgmlType.Q5_K, block.bytes(), 256);
    const expected = [17, 5.5, 2, 10.5, 3, 15.5, 4, 63 * 19 - 20];
    for (let i = 0; i < 256; i++) assert.equal(y[i], expected[i >> 5], `element ${i}`);
  });

  it("Q6_K: ql low bits, qh 2 high bits, int8 sub-block scales, d last", () => {
    const scales = [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8];
    const block = new ByteBuilder();
    for (let i = 0; i < 128; i++) block.u8(0x21); // ql: low nibble 1, high nibble 2
    for (let i = 0; i < 64; i++) block.u8(0xe4); // qh: 2-bit fields 0, 1, 2, 3
    block.u8(...scales.map((s) => s & 0xff)).u16(F16_HALF);
    assert.equal(block.length, 210);
    const y = dequantize(GgmlType.Q6_K, block.bytes(), 256);
    // Within each 128-element half, the four 32-element groups take (ql low, qh bits 0-1),
    // (ql[+32] low, bits 2-3), (ql high, bits 4-5), (ql[+32] high, bits 6-7):
    const qByGroup = [1 + 0 - 32, 1 + 16 - 32, 2 + 32 - 32, 2 + 48 - 32];
    assert.equal(y[0], 0.5 * 1 * -31);
    assert.equal(y[255], 0.5 * -8 * 18);
    for (let i = 0; i < 256; i++) assert.equal(y[i], 0.5 * scales[i >> 4]! * qByGroup[(i % 128) >> 5]!, `element ${i}`);
  });

  it("dequantizeRow honours source and output offsets and checks bounds", () => {
    const block = new ByteBuilder().u8(0xaa, 0xbb).u16(F16_EIGHTH);
    for (let j = 0; j < 32; j++) block.u8(j);
    const out = new Float32Array(40).fill(-1);
    dequantizeRow(GgmlType.Q8_0, block.bytes(), 2, 32, out, 4);
    assert.equal(out[3], -1);
    assert.equal(out[4], 0);
    assert.equal(out[35], 31 / 8);
    assert.equal(out[36], -1);
    assertInferenceError(() => dequantizeRow(GgmlType.Q8_0, block.bytes(), 3, 32, out, 0), "INTERNAL", ["Q8_0"]);
  });
});
