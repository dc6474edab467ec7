// Dot products of one weight row, read in its stored ggml encoding, with one
// activation row. Quantized types pair their integer quants with the int16
// activations of quantize.ts and multiply with `i32x4.dot_i16x8_s` (eight
// int16 products summed pairwise into four int32 lanes, exact for these
// ranges); float types multiply in f32x4.
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
//
// Activation pointers: xq int16 [cols] (element e at xq + 2e), and per block
// of 32 the f32 scale xd, float sum xs and quant sum xb.

import { FINITE_MASK, finiteHalvesWith, HALF_TO_FLOAT_SCALE, halfConstant, halfToFloat, MAGNITUDE_BITS, upperHalves } from "./half";

/** Eight int16 weights times the eight int16 activations at x, in four i32 lanes. */
export function dot8(weights: v128, x: usize, offset: usize): v128 {
  return i32x4.dot_i16x8_s(weights, v128.load(x + offset));
}

/** Sixteen int8 weights times the sixteen int16 activations at x + offset. */
export function dot16(weights: v128, x: usize, offset: usize): v128 {
  return i32x4.add(dot8(i16x8.extend_low_i8x16_s(weights), x, offset), dot8(i16x8.extend_high_i8x16_s(weights), x, offset + 16));
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
  // Two blocks per step into two accumulators: independent dependency chains.
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let i = 0;
  for (; i + 2 <= blocks; i += 2) {
    const isum0 = i32x4.add(dot16(v128.load(w, 2), xq, 0), dot16(v128.load(w, 18), xq, 32));
    const isum1 = i32x4.add(dot16(v128.load(w, 36), xq, 64), dot16(v128.load(w, 52), xq, 96));
    acc0 = scaledAdd(acc0, isum0, halfToFloat(load<u16>(w)) * load<f32>(xd));
    acc1 = scaledAdd(acc1, isum1, halfToFloat(load<u16>(w, 34)) * load<f32>(xd, 4));
    w += 68;
    xq += 128;
    xd += 8;
  }
  if (i < blocks) {
    const isum = i32x4.add(dot16(v128.load(w, 2), xq, 0), dot16(v128.load(w, 18), xq, 32));
    acc0 = scaledAdd(acc0, isum, halfToFloat(load<u16>(w)) * load<f32>(xd));
  }
  return horizontalSum(f32x4.add(acc0, acc1));
}

/** One Q4_0 block's 32 nibbles (at w + 2, the -8 offset not applied) times 32 activations at xq, in four i32 lanes. */
function blockQ4_0(w: usize, xq: usize): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    // The relaxed-SIMD build: the nibbles (0..15) are in range of the 7-bit operand of
    // relaxed_dot_i8x16_i7x16_s, which multiplies sixteen int8 pairs per instruction
    // (pmaddubsw on x86) against eight for dot_i16x8_s; exact, like the int16 path.
    const mask = i8x16.splat(0x0f);
    const packed = v128.load(w, 2);
    const x01 = i8x16.narrow_i16x8_s(v128.load(xq, 0), v128.load(xq, 16)); // elements 0..15 as int8
    const x23 = i8x16.narrow_i16x8_s(v128.load(xq, 32), v128.load(xq, 48)); // 16..31
    // Pairwise products summed in int16 lanes: at most 4 * 127 * 15, far from overflow.
    const low = i16x8.relaxed_dot_i8x16_i7x16_s(x01, v128.and(packed, mask));
    const high = i16x8.relaxed_dot_i8x16_i7x16_s(x23, v128.and(i16x8.shr_u(packed, 4), mask));
    // Lane j + lane j + 4: each i32 lane then sums the same eight elements as the
    // int16 path's lane, so both builds round the same sums: the same bits.
    const pairs = i16x8.add(low, high);
    return i32x4.add(i32x4.extend_low_i16x8_s(pairs), i32x4.extend_high_i16x8_s(pairs));
  }
  const lowMask = i16x8.splat(0x0f);
  // Bytes widened to u16 first: then a nibble is one and / one shift of a native 16-bit lane.
  const packed = v128.load(w, 2);
  const first = i16x8.extend_low_i8x16_u(packed); // bytes 0..7
  const second = i16x8.extend_high_i8x16_u(packed); // bytes 8..15
  const isum = i32x4.add(dot8(v128.and(first, lowMask), xq, 0), dot8(v128.and(second, lowMask), xq, 16));
  return i32x4.add(isum, i32x4.add(dot8(i16x8.shr_u(first, 4), xq, 32), dot8(i16x8.shr_u(second, 4), xq, 48)));
}

export function dotQ4_0(w: usize, xq: usize, xd: usize, xb: usize, blocks: i32): f32 {
  // Two blocks per step into two accumulators: independent dependency chains.
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  // The -8 offset, applied once per block through the activations' quant sum.
  let offsetTerm: f32 = 0;
  let i = 0;
  for (; i + 2 <= blocks; i += 2) {
    const scale0 = halfToFloat(load<u16>(w)) * load<f32>(xd);
    const scale1 = halfToFloat(load<u16>(w, 18)) * load<f32>(xd, 4);
    acc0 = scaledAdd(acc0, blockQ4_0(w, xq), scale0);
    acc1 = scaledAdd(acc1, blockQ4_0(w + 18, xq + 64), scale1);
    offsetTerm += scale0 * load<f32>(xb) + scale1 * load<f32>(xb, 4);
    w += 36;
    xq += 128;
    xd += 8;
    xb += 8;
  }
  if (i < blocks) {
    const scale = halfToFloat(load<u16>(w)) * load<f32>(xd);
    acc0 = scaledAdd(acc0, blockQ4_0(w, xq), scale);
    offsetTerm += scale * load<f32>(xb);
  }
  return horizontalSum(f32x4.add(acc0, acc1)) - 8 * offsetTerm;
}

/**
 * F16 row · f32 x. Each half is rebuilt as a float32 in four instructions (see
 * finiteHalvesWith), which holds for every half but infinities and NaNs; the row's
 * largest magnitude is tracked on the side, and a row that holds one of those
 * is computed again with the full conversion (dotF16Exact). Same bits either way.
 */
export function dotF16(w: usize, x: usize, cols: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let largest = i16x8.splat(0);
  const start = w;
  // Constants loaded once (V8 rebuilds an inline vector constant at each use), and sixteen
  // halves per pass in the same order of additions as eight: fewer loop instructions, same bits.
  const magnitudeBits = halfConstant(MAGNITUDE_BITS);
  const mask = halfConstant(FINITE_MASK);
  const scale = halfConstant(0);
  let c = 0;
  for (; c + 16 <= cols; c += 16) {
    const bits = v128.load(w);
    const next = v128.load(w, 16);
    largest = i16x8.max_u(largest, v128.and(bits, magnitudeBits));
    acc0 = f32x4.add(acc0, f32x4.mul(finiteHalvesWith(upperHalves(bits, false), mask, scale), v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(finiteHalvesWith(upperHalves(bits, true), mask, scale), v128.load(x, 16)));
    largest = i16x8.max_u(largest, v128.and(next, magnitudeBits));
    acc0 = f32x4.add(acc0, f32x4.mul(finiteHalvesWith(upperHalves(next, false), mask, scale), v128.load(x, 32)));
    acc1 = f32x4.add(acc1, f32x4.mul(finiteHalvesWith(upperHalves(next, true), mask, scale), v128.load(x, 48)));
    w += 32;
    x += 64;
  }
  for (; c + 8 <= cols; c += 8) {
    const bits = v128.load(w);
    largest = i16x8.max_u(largest, v128.and(bits, magnitudeBits));
    acc0 = f32x4.add(acc0, f32x4.mul(finiteHalvesWith(upperHalves(bits, false), mask, scale), v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(finiteHalvesWith(upperHalves(bits, true), mask, scale), v128.load(x, 16)));
    w += 16;
    x += 32;
  }
  // Exponent 31 somewhere in the row: an infinity or NaN, which finiteHalvesWith does not give.
  if (i16x8.bitmask(i16x8.ge_u(largest, i16x8.splat(0x7c00))) != 0) return dotF16Exact(start, x - <usize>c * 4, cols);
  return addHalvesTail(horizontalSum(f32x4.add(acc0, acc1)), w, x, cols - c);
}

/** dotF16 with every half converted exactly, infinities and NaNs included. */
function dotF16Exact(w: usize, x: usize, cols: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  const scale = f32x4.splat(HALF_TO_FLOAT_SCALE);
  let c = 0;
  for (; c + 8 <= cols; c += 8) {
    // Eight halves at once in 16-bit lanes: magnitude, and the float32's upper
    // 16 bits to OR in (the sign, plus an all-ones exponent for inf / NaN).
    const bits = v128.load(w);
    const magnitude = v128.and(bits, i16x8.splat(0x7fff));
    const special = v128.and(i16x8.ge_u(magnitude, i16x8.splat(0x7c00)), i16x8.splat(0x7f80));
    const upper = v128.or(v128.and(bits, i16x8.splat(-0x8000)), special);
    // The exponent and mantissa shifted into float32 position and rebiased by 2^112 (exact, subnormals included).
    const low = f32x4.mul(i32x4.shl(i32x4.extend_low_i16x8_u(magnitude), 13), scale);
    const high = f32x4.mul(i32x4.shl(i32x4.extend_high_i16x8_u(magnitude), 13), scale);
    const w0 = v128.or(low, upperHalves(upper, false));
    const w1 = v128.or(high, upperHalves(upper, true));
    acc0 = f32x4.add(acc0, f32x4.mul(w0, v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(w1, v128.load(x, 16)));
    w += 16;
    x += 32;
  }
  return addHalvesTail(horizontalSum(f32x4.add(acc0, acc1)), w, x, cols - c);
}

/** sum + the last `count` (below 8) halves at w times the floats at x, one at a time. */
function addHalvesTail(sum: f32, w: usize, x: usize, count: i32): f32 {
  for (let c = 0; c < count; c++) {
    sum += halfToFloat(<u32>load<u16>(w)) * load<f32>(x);
    w += 2;
    x += 4;
  }
  return sum;
}

export function dotBF16(w: usize, x: usize, cols: i32): f32 {
  let acc0 = f32x4.splat(0);
  let acc1 = f32x4.splat(0);
  let c = 0;
  for (; c + 8 <= cols; c += 8) {
    const bits = v128.load(w);
    acc0 = f32x4.add(acc0, f32x4.mul(upperHalves(bits, false), v128.load(x, 0)));
    acc1 = f32x4.add(acc1, f32x4.mul(upperHalves(bits, true), v128.load(x, 16)));
    w += 16;
    x += 32;
  }
  let sum = horizontalSum(f32x4.add(acc0, acc1));
  for (; c < cols; c++) {
    sum += reinterpret<f32>(<u32>load<u16>(w) << 16) * load<f32>(x);
    w += 2;
    x += 4;
  }
  return sum;
}
