// Dot products of one weight row, read in its stored ggml encoding, with one
// activation row. Quantized types pair their integer quants with activations
// quantized to int8 blocks of 32 (see quantize.ts) and multiply in
// i16x8 → i32x4 (`i32x4.dot_i16x8_s`); float types multiply in f32x4.
//
// Block layouts (ggml's):
//   Q8_0 (34 bytes / 32): f16 d, i8 q[32];                     w = d * q
//   Q4_0 (18 bytes / 32): f16 d, u8 qs[16]; low nibbles are elements 0..15,
//                         high nibbles 16..31;                 w = d * (q - 8)
//   Q4_K (144 bytes / 256): f16 d, f16 dmin, u8 scales[12] (eight 6-bit scales
//                         and mins), u8 qs[128]: each 32 bytes hold two
//                         sub-blocks of 32 (low nibbles, then high); w = d*sc*q - dmin*m
//   Q6_K (210 bytes / 256): u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits),
//                         i8 scales[16] (one per 16), f16 d;   w = d * sc * (q - 32)

import { bfloat16sToFloats, halfToFloat, halvesToFloats } from "./half";

/** Sum of the lane-wise products of two i8x16 vectors, in four i32 lanes. */
function dotI8(a: v128, b: v128): v128 {
  return i32x4.add(
    i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(a), i16x8.extend_low_i8x16_s(b)),
    i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(a), i16x8.extend_high_i8x16_s(b)),
  );
}

export function horizontalSum(v: v128): f32 {
  const pairs = f32x4.add(v, i32x4.shuffle(v, v, 2, 3, 0, 1));
  return f32x4.extract_lane(pairs, 0) + f32x4.extract_lane(pairs, 1);
}

/** acc + float(isum) * scale, lane-wise. */
function scaledAdd(acc: v128, isum: v128, scale: f32): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(isum), f32x4.splat(scale)));
}

export function dotQ8_0(w: usize, xq: usize, xd: usize, blocks: i32): f32 {
  let acc = f32x4.splat(0);
  for (let i = 0; i < blocks; i++) {
    const isum = i32x4.add(dotI8(v128.load(w, 2), v128.load(xq, 0)), dotI8(v128.load(w, 18), v128.load(xq, 16)));
    acc = scaledAdd(acc, isum, halfToFloat(load<u16>(w)) * load<f32>(xd));
    w += 34;
    xq += 32;
    xd += 4;
  }
  return horizontalSum(acc);
}

export function dotQ4_0(w: usize, xq: usize, xd: usize, blocks: i32): f32 {
  let acc = f32x4.splat(0);
  const lowMask = i8x16.splat(0x0f);
  const offset = i8x16.splat(8);
  for (let i = 0; i < blocks; i++) {
    const packed = v128.load(w, 2);
    const low = i8x16.sub(v128.and(packed, lowMask), offset);
    const high = i8x16.sub(i8x16.shr_u(packed, 4), offset);
    const isum = i32x4.add(dotI8(low, v128.load(xq, 0)), dotI8(high, v128.load(xq, 16)));
    acc = scaledAdd(acc, isum, halfToFloat(load<u16>(w)) * load<f32>(xd));
    w += 18;
    xq += 32;
    xd += 4;
  }
  return horizontalSum(acc);
}

/** Q4_K sub-block j's 6-bit scale (low byte) and min (second byte), unpacked from the 12 scale bytes. */
function scaleAndMin(scales: usize, j: i32): u32 {
  if (j < 4) return (<u32>load<u8>(scales + j) & 63) | ((<u32>load<u8>(scales + j + 4) & 63) << 8);
  const packed = <u32>load<u8>(scales + j + 4);
  const scale = (packed & 0xf) | ((<u32>load<u8>(scales + j - 4) >> 6) << 4);
  const min = (packed >> 4) | ((<u32>load<u8>(scales + j) >> 6) << 4);
  return scale | (min << 8);
}

export function dotQ4_K(w: usize, xq: usize, xd: usize, xs: usize, superBlocks: i32): f32 {
  let acc = f32x4.splat(0);
  let minTerm: f32 = 0;
  const lowMask = i8x16.splat(0x0f);
  for (let i = 0; i < superBlocks; i++) {
    const d = halfToFloat(load<u16>(w));
    const dmin = halfToFloat(load<u16>(w, 2));
    const scales = w + 4;
    let qs = w + 16;
    for (let j = 0; j < 8; j += 2) {
      const v0 = v128.load(qs, 0);
      const v1 = v128.load(qs, 16);
      const lowSum = i32x4.add(dotI8(v128.and(v0, lowMask), v128.load(xq, 0)), dotI8(v128.and(v1, lowMask), v128.load(xq, 16)));
      const highSum = i32x4.add(dotI8(i8x16.shr_u(v0, 4), v128.load(xq, 32)), dotI8(i8x16.shr_u(v1, 4), v128.load(xq, 48)));
      const first = scaleAndMin(scales, j);
      const second = scaleAndMin(scales, j + 1);
      acc = scaledAdd(acc, lowSum, d * <f32>(first & 0xff) * load<f32>(xd, 0));
      acc = scaledAdd(acc, highSum, d * <f32>(second & 0xff) * load<f32>(xd, 4));
      minTerm += dmin * (<f32>(first >> 8) * load<f32>(xs, 0) + <f32>(second >> 8) * load<f32>(xs, 4));
      qs += 32;
      xq += 64;
      xd += 8;
      xs += 8;
    }
    w += 144;
  }
  return horizontalSum(acc) - minTerm;
}

export function dotQ6_K(w: usize, xq: usize, xd: usize, superBlocks: i32): f32 {
  let acc = f32x4.splat(0);
  const lowMask = i8x16.splat(0x0f);
  const highMask = i8x16.splat(0x30);
  const offset = i8x16.splat(32);
  for (let i = 0; i < superBlocks; i++) {
    const d = halfToFloat(load<u16>(w, 208));
    // Two halves of 128 elements: 64 bytes of ql, 32 of qh and 8 scales each.
    for (let half = 0; half < 2; half++) {
      const ql = w + 64 * half;
      const qh = w + 128 + 32 * half;
      const scales = w + 192 + 8 * half;
      let sum0 = i32x4.splat(0);
      let sum1 = i32x4.splat(0);
      let sum2 = i32x4.splat(0);
      let sum3 = i32x4.splat(0);
      // Elements l = 16g .. 16g+15 of each quarter use scale g (+2, +4, +6 per quarter).
      for (let g = 0; g < 2; g++) {
        const a = v128.load(ql + 16 * g);
        const b = v128.load(ql + 32 + 16 * g);
        const h = v128.load(qh + 16 * g);
        const q0 = i8x16.sub(v128.or(v128.and(a, lowMask), i8x16.shl(v128.and(h, i8x16.splat(3)), 4)), offset);
        const q1 = i8x16.sub(v128.or(v128.and(b, lowMask), v128.and(i8x16.shl(h, 2), highMask)), offset);
        const q2 = i8x16.sub(v128.or(i8x16.shr_u(a, 4), v128.and(h, highMask)), offset);
        const q3 = i8x16.sub(v128.or(i8x16.shr_u(b, 4), v128.and(i8x16.shr_u(h, 2), highMask)), offset);
        const x = xq + 16 * g;
        sum0 = i32x4.add(sum0, i32x4.mul(dotI8(q0, v128.load(x, 0)), i32x4.splat(load<i8>(scales + g))));
        sum1 = i32x4.add(sum1, i32x4.mul(dotI8(q1, v128.load(x, 32)), i32x4.splat(load<i8>(scales + g + 2))));
        sum2 = i32x4.add(sum2, i32x4.mul(dotI8(q2, v128.load(x, 64)), i32x4.splat(load<i8>(scales + g + 4))));
        sum3 = i32x4.add(sum3, i32x4.mul(dotI8(q3, v128.load(x, 96)), i32x4.splat(load<i8>(scales + g + 6))));
      }
      acc = scaledAdd(acc, sum0, d * load<f32>(xd, 0));
      acc = scaledAdd(acc, sum1, d * load<f32>(xd, 4));
      acc = scaledAdd(acc, sum2, d * load<f32>(xd, 8));
      acc = scaledAdd(acc, sum3, d * load<f32>(xd, 12));
      xq += 128;
      xd += 16;
    }
    w += 210;
  }
  return horizontalSum(acc);
}

export function dotF32(w: usize, x: usize, cols: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let c = 0;
  for (; c + 8 <= cols; c += 8) {
    acc0 = f32x4.add(acc0, f32x4.mul(v128.load(w, 0), v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(v128.load(w, 16), v128.load(x, 16)));
    w += 32;
    x += 32;
  }
  let sum = horizontalSum(f32x4.add(acc0, acc1));
  for (; c < cols; c++) {
    sum += load<f32>(w) * load<f32>(x);
    w += 4;
    x += 4;
  }
  return sum;
}

/** F16 (bfloat = false) or BF16 (bfloat = true) weights. */
export function dotHalf(w: usize, x: usize, cols: i32, bfloat: bool): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let c = 0;
  for (; c + 8 <= cols; c += 8) {
    const bits = v128.load(w);
    const low = i32x4.extend_low_i16x8_u(bits);
    const high = i32x4.extend_high_i16x8_u(bits);
    const w0 = bfloat ? bfloat16sToFloats(low) : halvesToFloats(low);
    const w1 = bfloat ? bfloat16sToFloats(high) : halvesToFloats(high);
    acc0 = f32x4.add(acc0, f32x4.mul(w0, v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(w1, v128.load(x, 16)));
    w += 16;
    x += 32;
  }
  let sum = horizontalSum(f32x4.add(acc0, acc1));
  for (; c < cols; c++) {
    const bits = <u32>load<u16>(w);
    sum += (bfloat ? reinterpret<f32>(bits << 16) : halfToFloat(bits)) * load<f32>(x);
    w += 2;
    x += 4;
  }
  return sum;
}
