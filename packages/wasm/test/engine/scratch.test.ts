// ForwardScratch: buffers carved from blocks in the kernels' memory, the
// excess of a forward larger than any before taken from that memory too (and
// reused layer after layer), all handed back when the blocks grow or go.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ForwardScratch, type ScratchMemory } from "../../src/engine/scratch.js";

/** A ScratchMemory that hands out views of one big buffer and records what is live. */
function countingMemory(): ScratchMemory & { live: Set<Uint8Array>; allocations: number; backing: ArrayBuffer } {
  const backing = new ArrayBuffer(1 << 20);
  let top = 0;
  const memory = {
    live: new Set<Uint8Array>(),
    allocations: 0,
    backing,
    allocate(byteLength: number, align = 64): Uint8Array {
      top = Math.ceil(top / align) * align;
      const view = new Uint8Array(backing, top, byteLength);
      top += byteLength;
      memory.allocations++;
      memory.live.add(view);
      return view;
    },
    release(view: Uint8Array): void {
      assert.ok(memory.live.delete(view), "released twice or never allocated");
    },
  };
  return memory;
}

describe("ForwardScratch", () => {
  it("gives a first, larger forward buffers in the kernels' memory, reuses them across layers, then settles into one block", () => {
    const memory = countingMemory();
    const scratch = new ForwardScratch(memory);
    const layerSizes = [640, 640, 2048, 640];
    const runForward = (): Float32Array[] => {
      scratch.begin(1);
      const handed = [scratch.forwardFloats(640)];
      for (let layer = 0; layer < 4; layer++) {
        scratch.freeLayerBuffers();
        for (const size of layerSizes) handed.push(scratch.floats(size));
      }
      return handed;
    };
    const first = runForward();
    for (const buffer of first) assert.equal(buffer.buffer, memory.backing, "every buffer of the first forward lives in the kernels' memory");
    // Each layer starts with the one before's buffers free: after the first layer, its excess chunks are reused.
    const afterFirst = memory.allocations;
    assert.ok(afterFirst <= 1 + layerSizes.length, `${afterFirst} allocations for 4 layers`);
    const second = runForward();
    for (const buffer of second) assert.equal(buffer.buffer, memory.backing);
    // The second forward's begin released the excess and grew each block once: two blocks live.
    assert.equal(memory.live.size, 2);
    assert.equal(memory.allocations, afterFirst + 2);
    scratch.dispose();
    assert.equal(memory.live.size, 0, "dispose hands everything back");
  });

  it("sizes the blocks for a larger batch before it runs, from the floats a token needed before", () => {
    const memory = countingMemory();
    const scratch = new ForwardScratch(memory);
    // A layer's buffers are [tokens, width]: widths 64, 64, 256 and 64.
    const runForward = (tokens: number): void => {
      scratch.begin(tokens);
      scratch.forwardFloats(tokens * 64);
      for (let layer = 0; layer < 3; layer++) {
        scratch.freeLayerBuffers();
        for (const width of [64, 64, 256, 64]) scratch.floats(tokens * width);
      }
    };
    runForward(1);
    runForward(1); // the blocks now hold a one-token forward
    const settled = memory.allocations;
    runForward(8);
    // Both blocks replaced at begin, nothing taken beside them during the forward.
    assert.equal(memory.allocations, settled + 2);
    runForward(8);
    assert.equal(memory.allocations, settled + 2, "an equal batch after it allocates nothing");
    assert.equal(memory.live.size, 2);
    scratch.dispose();
  });

  it("without an allocating memory, hands out ordinary arrays", () => {
    const scratch = new ForwardScratch();
    scratch.begin(1);
    const buffer = scratch.floats(100);
    assert.equal(buffer.length, 100);
    scratch.dispose();
  });
});
