// SharedArena: the allocator over the kernels' shared memory.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SharedArena } from "../../src/kernels/wasm/arena.js";
import { assertInferenceError } from "./helpers.js";

describe("SharedArena", () => {
  it("hands out aligned, zeroed, non-overlapping ranges above the base", () => {
    const arena = new SharedArena(1000, 64);
    const ranges: [number, number][] = [];
    for (const [size, align] of [[10, 1], [100, 64], [7, 8], [4096, 4096], [1, 2]] as const) {
      const address = arena.allocate(size, align);
      assert.ok(address >= 1000);
      assert.equal(address % align, 0);
      assert.ok(arena.heap.subarray(address, address + size).every((byte) => byte === 0));
      arena.heap.fill(0xff, address, address + size);
      ranges.push([address, address + size]);
    }
    ranges.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < ranges.length; i++) assert.ok(ranges[i]![0] >= ranges[i - 1]![1], "ranges overlap");
  });

  it("reuses released ranges and merges neighbours", () => {
    const arena = new SharedArena(0, 64);
    const a = arena.allocate(1024);
    const b = arena.allocate(1024);
    const c = arena.allocate(1024);
    const guard = arena.allocate(64);
    arena.release(a);
    arena.release(b);
    // a and b merged: 2048 bytes fit where they were, before c.
    assert.equal(arena.allocate(2048), a);
    arena.release(c);
    assert.equal(arena.allocate(512), c, "first fit");
    assert.ok(guard > c);
  });

  it("grows the memory, keeping addresses and earlier views valid", () => {
    const arena = new SharedArena(0, 1024);
    const small = arena.allocate(16);
    const view = arena.view(small, 16);
    view.fill(42);
    const before = arena.byteLength;
    const big = arena.allocate(3 << 20);
    assert.ok(arena.byteLength >= big + (3 << 20) && arena.byteLength > before);
    assert.equal(arena.heap[small], 42);
    assert.equal(arena.addressOf(view), small, "a view made before growing is still recognised");
    assert.equal(arena.addressOf(arena.view(big, 4)), big);
    assert.equal(arena.addressOf(new Uint8Array(4)), undefined);
  });

  it("recognises its views after another arena's memory grows (V8 then renews every shared memory's buffer object)", () => {
    const arena = new SharedArena(0, 64);
    const other = new SharedArena(0, 64);
    const first = arena.allocate(16);
    other.allocate(2 << 20); // grows the other memory
    const view = arena.view(arena.allocate(32), 32);
    assert.notEqual(arena.addressOf(view), undefined, "a view made after another memory grew");
    assert.equal(arena.addressOf(arena.view(first, 16)), first);
    assert.equal(other.addressOf(view), undefined, "another arena's view is not this one's");
  });

  it("fails cleanly past its maximum and on bad arguments", () => {
    const arena = new SharedArena(0, 4);
    assertInferenceError(() => arena.allocate(5 * 65536), "UNSUPPORTED", /cannot grow/);
    assertInferenceError(() => arena.allocate(-1), "INTERNAL");
    assertInferenceError(() => arena.allocate(8, 3), "INTERNAL", /power of two/);
    assertInferenceError(() => arena.release(12345), "INTERNAL", /not an allocation/);
    // Still usable after a refused allocation.
    assert.ok(arena.allocate(1024) >= 0);
  });
});
