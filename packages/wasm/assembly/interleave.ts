// Q4_0, Q8_0 and Q5_0 matrices re-laid out at load for decode (one activation row):
// rows in groups of four, their blocks interleaved, so one pass over a single
// stream of memory reads four rows at a time. Each activation vector is loaded
// once for four rows and the per-block float work (int-to-float, the scales,
// Q4_0's -8 offset) runs once per four rows on a vector whose lane k is row k's.
// (Four rows read from four places at once ran slower than one row at a time
// when the weights stream from memory; interleaved, the same arithmetic runs
// faster than the plain rows for each of these types.)
//
// Layouts Q4_0_X4, Q8_0_X4 and Q5_0_X4 (the bytes of Q4_0 / Q8_0 / Q5_0, moved), for rows R,
// B = cols / 32 blocks, and P = 16 (Q4_0's nibbles), 32 (Q8_0's quants) or 20 (Q5_0's fifth
// bits and nibbles) payload bytes per block:
//   groups:   floor(R / 4) groups of four rows, (8 + 4P) * B bytes each; per block b:
//               f16 d[4]       row k's scale at 2k                     8 bytes
//               u8 q[4][P]     row k's payload at 8 + kP               4P bytes
//   tail:     the last R % 4 rows in the plain type, after the groups
// A row's block b in a group: scale at group + (8 + 4P)b + 2k, payload at group + (8 + 4P)b + 8 + kP.
// Q5_1_X4 (the bytes of Q5_1, P = 20 as Q5_0's) adds the four rows' f16 minimums after the scales:
// per block d[4] (8 bytes), m[4] (8 bytes), then the payloads at 16 + kP; 16 + 4P bytes a block.
// Q8_0's payload is its 32 quants as stored. Q5_0's is its 32 fifth bits, reordered
// (fifthBitLanes: element j < 16 in byte j % 4 at bit j / 4, element 16 + j at bit 4 + j / 4,
// so that the word splat across a vector, whose byte j is its byte j % 4, and one mask per half
// give each element's bit in its own byte, with no shuffle), then its 16 nibble bytes as stored.
// Q4_0's is rearranged for its dot product: as eight u16 lanes, lane j holds the signed 4-bit
// values q - 8 (q XOR 8) of elements j, 8 + j, 16 + j and 24 + j in bits 0-3, 4-7, 8-11 and
// 12-15. Shifting each to the top four bits gives (q - 8) * 4096 in an int16 lane, in element
// order, with no widening and no -8 term.
//
// The decode loops store each row's integer sums to `sink` (the calling thread's scratch, never
// read by the caller) as soon as they are computed. V8 keeps memory accesses in program order
// but lays out the pure work between them level by level: all of a block's loads, then every
// unpack, then every product. For four rows that holds ~20 vectors at once, more than the 15
// registers it allocates, and it spilled many of them to its stack each block. A store after
// each row keeps the next row's loads (and so its work) behind it, and a block runs (nearly)
// without spills, in fewer instructions. Their vector constants are loaded once before the loop
// (V8 rebuilds a vector constant written inline at each use, three instructions, inside the
// loop). The four block scales convert the short way of finite halves (four instructions
// against ten) while the loop tracks their largest magnitude; a group with an infinite or NaN scale, which a real model does
// not have, is computed again with the full conversion, so every group gets the same bits as
// with the full one.

import { widenQuants } from "./decode";
import { FINITE_MASK, finiteHalvesWith, HALF_SCALE_OVER_4096, halfConstant, halfToFloat, halvesToFloats, halvesToFloatsWith, upperHalves } from "./half";
import { PACKED_BLOCK_BYTES, sumLanes4 } from "./tile";

/** Bytes of one block of a group: four scales (and with `minimums`, Q5_1's, four minimums), four payloads. */
export function groupBlockBytes(payload: usize, minimums: bool = false): usize {
  return groupHeaderBytes(minimums) + 4 * payload;
}

/** Bytes of a group block before its payloads: the four f16 scales, then Q5_1's four f16 minimums. */
function groupHeaderBytes(minimums: bool): usize {
  return minimums ? 16 : 8;
}

/**
 * Rewrites a Q4_0 (payload 16), Q8_0 (payload 32), Q5_0 (payload 20) or, with `minimums`, Q5_1
 * (payload 20) matrix [rows, cols] at w into its interleaved layout, in place. scratch:
 * 4 * rowBytes bytes, a copy of the group being rewritten.
 */
export function interleaveRows(w: usize, rows: i32, cols: i32, payload: usize, scratch: usize, minimums: bool = false): void {
  const blocks = cols / 32;
  const header = groupHeaderBytes(minimums);
  const blockBytes = (minimums ? 4 : 2) + payload; // the plain block: d (and m), then the payload's bytes
  const rowBytes = <usize>blocks * blockBytes;
  const groupBlock = groupBlockBytes(payload, minimums);
  for (let r = 0; r + 4 <= rows; r += 4) {
    const group = w + <usize>r * rowBytes;
    memory.copy(scratch, group, 4 * rowBytes);
    for (let b = 0; b < blocks; b++) {
      const out = group + <usize>b * groupBlock;
      for (let k = 0; k < 4; k++) {
        let block = scratch + <usize>k * rowBytes + <usize>b * blockBytes;
        store<u16>(out + 2 * k, load<u16>(block));
        if (minimums) store<u16>(out + 8 + 2 * k, load<u16>(block, 2));
        block += minimums ? 4 : 2;
        // 16, 20 or 32 bytes: vector moves (a memory.copy per block costs several times more at load).
        const to = out + header + <usize>k * payload;
        if (payload == 32) {
          v128.store(to, v128.load(block));
          v128.store(to, v128.load(block, 16), 16);
        } else if (payload == 20) {
          store<u32>(to, fifthBitLanes(load<u32>(block)));
          v128.store(to, v128.load(block, 4), 4);
        } else {
          v128.store(to, signedNibbleLanes(v128.load(block)));
        }
      }
    }
  }
}

/**
 * A Q4_0 block's 16 bytes as stored (byte e: element e in the low nibble, e + 16 in the high)
 * rearranged into the signed-nibble lanes of Q4_0_X4 (header).
 */
function signedNibbleLanes(packed: v128): v128 {
  const mask = i8x16.splat(0x0f);
  const low = v128.and(packed, mask); // bytes: elements 0..15
  const high = v128.and(i16x8.shr_u(packed, 4), mask); // bytes: elements 16..31
  // Bytes j = element j | element 8 + j << 4 (and 16 + j | 24 + j << 4): values below 16, so the
  // 16-bit shift moves no bits across bytes.
  const first = v128.or(low, i16x8.shl(i8x16.shuffle(low, low, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0), 4));
  const second = v128.or(high, i16x8.shl(i8x16.shuffle(high, high, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0), 4));
  const lanes = i8x16.shuffle(first, second, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  return v128.xor(lanes, i8x16.splat(<i8>0x88)); // q XOR 8: q - 8 as a signed 4-bit value
}

/** Byte j: bit j of `bits` (0..15) set, as 0xff or 0 (a constant's selector bytes: BYTE_BITS below). */
function flagsOf(bits: v128, spread: v128): v128 {
  return i8x16.eq(v128.and(i8x16.swizzle(bits, spread), v128.load(BYTE_BITS)), v128.load(BYTE_BITS));
}

/** Bit j % 8 in byte j, and the swizzles that give byte j qh's byte j / 8 (low half) or 2 + j / 8 (high half). */
const BYTE_BITS = memory.data<u8>([
  1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
  0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
]);

/**
 * A Q5_0 block's fifth bits (bit e: element e) in Q5_0_X4's order (header): bit 8b + k is
 * element b + 4k, bit 8b + 4 + k element 16 + b + 4k (b = 0..3, k = 0..3). At load only.
 */
function fifthBitLanes(qh: u32): u32 {
  const word = i32x4.splat(qh);
  const low = flagsOf(word, v128.load(BYTE_BITS, 16)); // byte j: element j
  const high = flagsOf(word, v128.load(BYTE_BITS, 32)); // byte j: element 16 + j
  const first = i8x16.bitmask(i8x16.shuffle(low, high, 0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29));
  const second = i8x16.bitmask(i8x16.shuffle(low, high, 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31));
  return <u32>first | (<u32>second << 16);
}

/**
 * The Q5_0_X4 decode constants: 0x0f and 0x10 in every byte, then the masks that pick
 * element j's fifth bit (low half, high half) out of byte j of the splat fifth-bit word.
 */
const Q5_CONSTANTS = memory.data<u8>([
  0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f,
  0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
  1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8,
  16, 16, 16, 16, 32, 32, 32, 32, 64, 64, 64, 64, 128, 128, 128, 128,
]);

/**
 * A Q5_0_X4 row's block at p (fifth bits, then nibbles) as its values q (0..31, the -16 not
 * applied) in int8 lanes: elements 0..15 (high = false) or 16..31. k0..k3: Q5_CONSTANTS.
 */
function fiveBitValues(p: usize, high: bool, k0: v128, k1: v128, k2: v128, k3: v128): v128 {
  const packed = v128.load(p, 4);
  const nibbles = high ? v128.and(i16x8.shr_u(packed, 4), k0) : v128.and(packed, k0);
  const mask = high ? k3 : k2;
  const set = i8x16.eq(v128.and(v128.load32_splat(p), mask), mask);
  return v128.or(nibbles, v128.and(set, k1));
}

/**
 * A Q5_0_X4 row's block at p times the int16 activations x0..x3: four i32 lanes summing to
 * sum q * x with q unsigned (0..31; the caller subtracts 16 * sum x). k0..k3: Q5_CONSTANTS.
 */
function fiveBitDot(p: usize, x0: v128, x1: v128, x2: v128, x3: v128, k0: v128, k1: v128, k2: v128, k3: v128): v128 {
  const low = fiveBitValues(p, false, k0, k1, k2, k3);
  const high = fiveBitValues(p, true, k0, k1, k2, k3);
  const first = i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(low), x0), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(low), x1));
  return i32x4.add(first, i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(high), x2), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(high), x3)));
}

/** A Q5_0_X4 row's block at p as 32 int16 q - offset in element order at q16 (Q5_0: 16; Q5_1_X4's: 0). */
function fiveBitsToInt16(p: usize, q16: usize, offset: i16 = 16): void {
  const k0 = v128.load(Q5_CONSTANTS);
  const k1 = v128.load(Q5_CONSTANTS, 16);
  const k2 = v128.load(Q5_CONSTANTS, 32);
  const k3 = v128.load(Q5_CONSTANTS, 48);
  const offsets = i16x8.splat(offset);
  const low = fiveBitValues(p, false, k0, k1, k2, k3);
  const high = fiveBitValues(p, true, k0, k1, k2, k3);
  v128.store(q16, i16x8.sub(i16x8.extend_low_i8x16_u(low), offsets), 0);
  v128.store(q16, i16x8.sub(i16x8.extend_high_i8x16_u(low), offsets), 16);
  v128.store(q16, i16x8.sub(i16x8.extend_low_i8x16_u(high), offsets), 32);
  v128.store(q16, i16x8.sub(i16x8.extend_high_i8x16_u(high), offsets), 48);
}

/** The top nibble of each 16-bit lane, as data for the decode loop (see the header). */
const TOP_NIBBLE = memory.data<u16>([0xf000, 0xf000, 0xf000, 0xf000, 0xf000, 0xf000, 0xf000, 0xf000]);

/** Element groups of a Q4_0_X4 row's block at p: (q - 8) * 4096 for elements 8i .. 8i + 7, i = 0..3. */
function signedNibbles(p: usize, i: i32): v128 {
  return signedNibblesOf(v128.load(p), i, v128.load(TOP_NIBBLE));
}

/** signedNibbles of a block's loaded lanes v, with the TOP_NIBBLE mask given. */
function signedNibblesOf(v: v128, i: i32, mask: v128): v128 {
  switch (i) {
    case 0:
      return i16x8.shl(v, 12);
    case 1:
      return v128.and(i16x8.shl(v, 8), mask);
    case 2:
      return v128.and(i16x8.shl(v, 4), mask);
    default:
      return v128.and(v, mask);
  }
}

/**
 * A Q4_0_X4 row's block at p times the int16 activations x0..x3 (elements 0-7, 8-15, 16-23,
 * 24-31): four i32 lanes summing to 4096 * sum (q - 8) * x (exact: at most 2^27 in magnitude).
 */
function nibbleDot(p: usize, x0: v128, x1: v128, x2: v128, x3: v128, mask: v128): v128 {
  const v = v128.load(p);
  const first = i32x4.add(i32x4.dot_i16x8_s(signedNibblesOf(v, 0, mask), x0), i32x4.dot_i16x8_s(signedNibblesOf(v, 1, mask), x1));
  return i32x4.add(first, i32x4.add(i32x4.dot_i16x8_s(signedNibblesOf(v, 2, mask), x2), i32x4.dot_i16x8_s(signedNibblesOf(v, 3, mask), x3)));
}

/** A row's 32 int8 quants at p times the int16 activations x0..x3, in four i32 lanes. */
function quantDot(p: usize, x0: v128, x1: v128, x2: v128, x3: v128): v128 {
  const low = v128.load(p);
  const high = v128.load(p, 16);
  const sum = i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(low), x0), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(low), x1));
  return i32x4.add(sum, i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(high), x2), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(high), x3)));
}

/** GroupLoop's kinds of group. */
const GROUP_Q4_0 = 0;
const GROUP_Q8_0 = 1;
const GROUP_Q5_0 = 2;
const GROUP_Q5_1 = 3;

/** Payload bytes of a row's block in a group of `kind`. */
function payloadBytes(kind: i32): usize {
  return kind == GROUP_Q4_0 ? 16 : kind == GROUP_Q8_0 ? 32 : 20;
}

/**
 * The decode loops of the interleaved groups, static so that they can be marked @inline
 * (eslint's parser accepts decorators on class members only) and specialized on `exact`.
 */
class GroupLoop {
  /**
   * The f16 scales of a group's block at g, times `scale`. Not exact (exact = false): the
   * finite halves' short conversion (half.ts's finiteHalvesWith, four instructions against ten),
   * whose caller tracks the largest magnitude to find the infinities and NaNs it gets wrong;
   * c0..c2: halfConstant(0 or HALF_SCALE_OVER_4096, FINITE_MASK, -) then, or (0 or
   * HALF_SCALE_OVER_4096, 1, 2) for halvesToFloatsWith.
   */
  @inline static scales(g: usize, scale: f32, exact: bool, c0: v128, c1: v128, c2: v128): v128 {
    const bits = v128.load64_zero(g);
    const floats = exact ? halvesToFloatsWith(i32x4.extend_low_i16x8_u(bits), c0, c1, c2) : finiteHalvesWith(upperHalves(bits, false), c1, c0);
    return f32x4.mul(floats, f32x4.splat(scale));
  }

  /** The group's four scales at g shifted left by one (the sign dropped), for the running largest. */
  @inline static magnitudes(g: usize): v128 {
    return i16x8.shl(v128.load64_zero(g), 1);
  }

  /**
   * A group's row k's block at g · the activations x0..x3 (nibbleDot, quantDot, fiveBitDot);
   * m: TOP_NIBBLE (Q4_0), k0..k3: Q5_CONSTANTS (Q5_0).
   */
  @inline static rowDot(g: usize, k: usize, kind: i32, x0: v128, x1: v128, x2: v128, x3: v128, m: v128, k0: v128, k1: v128, k2: v128, k3: v128): v128 {
    const p = g + groupHeaderBytes(kind == GROUP_Q5_1) + payloadBytes(kind) * k;
    if (kind == GROUP_Q4_0) return nibbleDot(p, x0, x1, x2, x3, m);
    if (kind == GROUP_Q8_0) return quantDot(p, x0, x1, x2, x3);
    return fiveBitDot(p, x0, x1, x2, x3, k0, k1, k2, k3);
  }

  /**
   * dotQ4_0Group's, dotQ8_0Group's, dotQ5_0Group's or dotQ5_1Group's loop (kind); not exact:
   * the largest doubled magnitude of its scales (and minimums) left at sink + 64.
   */
  @inline static run(g: usize, xq: usize, xd: usize, xb: usize, blocks: i32, sink: usize, kind: i32, exact: bool): v128 {
    let acc = f32x4.splat(0);
    let largest = i16x8.splat(0);
    // Each kind loads only its own constants (the others stand in, unread).
    const zero = i32x4.splat(0);
    const mask = kind == GROUP_Q4_0 ? v128.load(TOP_NIBBLE) : zero;
    const fiveBits = kind == GROUP_Q5_0 || kind == GROUP_Q5_1;
    const k0 = fiveBits ? v128.load(Q5_CONSTANTS) : zero;
    const k1 = fiveBits ? v128.load(Q5_CONSTANTS, 16) : zero;
    const k2 = fiveBits ? v128.load(Q5_CONSTANTS, 32) : zero;
    const k3 = fiveBits ? v128.load(Q5_CONSTANTS, 48) : zero;
    // Q4_0's sums are 4096 t (below): its scales come out of the conversion times 1 / 4096.
    const c0 = halfConstant(kind == GROUP_Q4_0 ? HALF_SCALE_OVER_4096 : 0);
    const c1 = halfConstant(exact ? 1 : FINITE_MASK);
    const c2 = halfConstant(2);
    for (let i = 0; i < blocks; i++) {
      const x0 = v128.load(xq, 0);
      const x1 = v128.load(xq, 16);
      const x2 = v128.load(xq, 32);
      const x3 = v128.load(xq, 48);
      // Each row's block sum (Q8_0's sum q * x, Q5_0's sum (q - 16) * x, exact integers);
      // Q4_0's 4096 t, t = sum (q - 8) * x, an integer below 2^15 in
      // magnitude, so exact in f32; the 1 / 4096 is in the weight scales (c0), a power of two, so
      // the same bits as scaling the sums, for no instruction at all. (The relaxed build runs this
      // same loop: its 8-bit products would need the lanes turned back into unsigned nibbles and
      // the activations narrowed per block, which costs more than it saves.)
      // Each row's products finish before the next row's loads (sink, header).
      const r0 = GroupLoop.rowDot(g, 0, kind, x0, x1, x2, x3, mask, k0, k1, k2, k3);
      v128.store(sink, r0);
      const r1 = GroupLoop.rowDot(g, 1, kind, x0, x1, x2, x3, mask, k0, k1, k2, k3);
      v128.store(sink, r1, 16);
      const r2 = GroupLoop.rowDot(g, 2, kind, x0, x1, x2, x3, mask, k0, k1, k2, k3);
      v128.store(sink, r2, 32);
      const r3 = GroupLoop.rowDot(g, 3, kind, x0, x1, x2, x3, mask, k0, k1, k2, k3);
      v128.store(sink, r3, 48);
      let sums = f32x4.convert_i32x4_s(sumLanes4(r0, r1, r2, r3));
      // Q5_0: sum (q - 16) * x = sum q * x - 16 * sum x, exact (integers below 2^24).
      if (kind == GROUP_Q5_0) sums = f32x4.sub(sums, f32x4.splat(16 * load<f32>(xb)));
      if (!exact) largest = i16x8.max_u(largest, GroupLoop.magnitudes(g));
      acc = f32x4.add(acc, f32x4.mul(sums, GroupLoop.scales(g, load<f32>(xd), exact, c0, c1, c2)));
      if (kind == GROUP_Q5_1) {
        // + m * (xd * xb): the minimums meet the activations' scale times quant sum (legacy.ts).
        if (!exact) largest = i16x8.max_u(largest, GroupLoop.magnitudes(g + 8));
        acc = f32x4.add(acc, GroupLoop.scales(g + 8, load<f32>(xd) * load<f32>(xb), exact, c0, c1, c2));
      }
      g += groupBlockBytes(payloadBytes(kind), kind == GROUP_Q5_1);
      xq += 64;
      xd += 4;
      xb += 4;
    }
    if (!exact) v128.store(sink, largest, 64);
    return acc;
  }
}

/** Whether the largest doubled magnitude at p (GroupLoop's, after a loop) has exponent 31: an infinity or NaN. */
function hadSpecialScale(p: usize): bool {
  return i16x8.bitmask(i16x8.ge_u(v128.load(p), i16x8.splat(<i16>0xf800))) != 0;
}

/**
 * Lane k = row k of the Q4_0_X4 group at g · the activations: xq int16
 * [blocks * 32], xd the blocks' scales (the signed-nibble lanes carry the -8 offset themselves).
 * sink: 80 bytes of this thread's scratch, written and never read by the caller (header). The
 * scales convert the short way, and a group with an infinite or NaN scale, found by the largest
 * magnitude the loop tracks, is computed again the exact way: the same bits for every group.
 */
export function dotQ4_0Group(g: usize, xq: usize, xd: usize, blocks: i32, sink: usize): v128 {
  const acc = GroupLoop.run(g, xq, xd, 0, blocks, sink, GROUP_Q4_0, false);
  return hadSpecialScale(sink + 64) ? GroupLoop.run(g, xq, xd, 0, blocks, sink, GROUP_Q4_0, true) : acc;
}

/**
 * Row `lane` of the Q4_0_X4 group at g decoded as decode.ts's decodeQ4_0 does a plain row:
 * q16 [blocks * 32] i16 (q - 8), scales [blocks] f32, mins zero.
 */
export function decodeGroupRowQ4_0(g: usize, lane: i32, blocks: i32, q16: usize, scales: usize, mins: usize): void {
  let p = g + 8 + 16 * <usize>lane;
  let scale = g + 2 * <usize>lane;
  for (let i = 0; i < blocks; i++) {
    signedLanesToInt16(p, q16);
    store<f32>(mins, 0);
    store<f32>(scales, halfToFloat(load<u16>(scale)));
    q16 += 64;
    mins += 4;
    scales += 4;
    p += 72;
    scale += 72;
  }
}

/** A Q4_0_X4 row's block of signed-nibble lanes at p as 32 int16 q - 8 in element order at q16. */
function signedLanesToInt16(p: usize, q16: usize): void {
  // (q - 8) * 4096 shifted back down, sign kept.
  v128.store(q16, i16x8.shr_s(signedNibbles(p, 0), 12), 0);
  v128.store(q16, i16x8.shr_s(signedNibbles(p, 1), 12), 16);
  v128.store(q16, i16x8.shr_s(signedNibbles(p, 2), 12), 32);
  v128.store(q16, i16x8.shr_s(signedNibbles(p, 3), 12), 48);
}

/**
 * A whole Q4_0_X4, Q8_0_X4 or Q5_0_X4 group at g (its payload: 16, 32 or 20
 * bytes) decoded straight into tile.ts's packed layout (packTile's result for
 * its four rows, the same values): the group's four scales convert in one vector
 * and its payloads sit side by side, so prefill skips decoding row by row and
 * packing afterwards.
 */
export function decodeGroupToTile(g: usize, blocks: i32, payload: usize, packed: usize): void {
  const groupBlock = groupBlockBytes(payload);
  for (let i = 0; i < blocks; i++) {
    v128.store(packed, halvesToFloats(i32x4.extend_low_i16x8_u(v128.load64_zero(g))));
    for (let k = 0; k < 4; k++) {
      const to = packed + 16 + <usize>k * 64;
      const from = g + 8 + <usize>k * payload;
      if (payload == 16) signedLanesToInt16(from, to);
      else if (payload == 32) widenQuants(from, to);
      else fiveBitsToInt16(from, to);
    }
    g += groupBlock;
    packed += PACKED_BLOCK_BYTES;
  }
}

/** As dotQ4_0Group for a Q8_0_X4 group. */
export function dotQ8_0Group(g: usize, xq: usize, xd: usize, blocks: i32, sink: usize): v128 {
  const acc = GroupLoop.run(g, xq, xd, 0, blocks, sink, GROUP_Q8_0, false);
  return hadSpecialScale(sink + 64) ? GroupLoop.run(g, xq, xd, 0, blocks, sink, GROUP_Q8_0, true) : acc;
}

/** As dotQ4_0Group for a Q5_0_X4 group; xb: the activation blocks' quant sums (for the -16). */
export function dotQ5_0Group(g: usize, xq: usize, xd: usize, xb: usize, blocks: i32, sink: usize): v128 {
  const acc = GroupLoop.run(g, xq, xd, xb, blocks, sink, GROUP_Q5_0, false);
  return hadSpecialScale(sink + 64) ? GroupLoop.run(g, xq, xd, xb, blocks, sink, GROUP_Q5_0, true) : acc;
}

/**
 * As dotQ4_0Group for a Q5_1_X4 group; xb: the activation blocks' quant sums (for the minimums,
 * m * xd * xb per row and block, as legacy.ts's plain rows).
 */
export function dotQ5_1Group(g: usize, xq: usize, xd: usize, xb: usize, blocks: i32, sink: usize): v128 {
  const acc = GroupLoop.run(g, xq, xd, xb, blocks, sink, GROUP_Q5_1, false);
  return hadSpecialScale(sink + 64) ? GroupLoop.run(g, xq, xd, xb, blocks, sink, GROUP_Q5_1, true) : acc;
}

/**
 * Row `lane` of the Q5_0_X4 group (or with `minimums`, the Q5_1_X4 group) at g decoded as
 * legacy.ts's decodeLegacy decodes a plain Q5_0 (Q5_1) row: q16 [blocks * 32] int16 (q - 16; Q5_1:
 * q), scales [blocks] f32, mins [blocks] f32 (zero; Q5_1: -m).
 */
export function decodeGroupRowFiveBits(g: usize, lane: i32, blocks: i32, q16: usize, scales: usize, mins: usize, minimums: bool): void {
  const groupBlock = groupBlockBytes(20, minimums);
  const payloadAt = groupHeaderBytes(minimums) + 20 * <usize>lane;
  for (let i = 0; i < blocks; i++) {
    fiveBitsToInt16(g + payloadAt, q16, minimums ? 0 : 16);
    store<f32>(scales, halfToFloat(load<u16>(g + 2 * <usize>lane)));
    store<f32>(mins, minimums ? -halfToFloat(load<u16>(g + 8 + 2 * <usize>lane)) : 0);
    g += groupBlock;
    q16 += 64;
    scales += 4;
    mins += 4;
  }
}
