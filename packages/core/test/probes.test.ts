import assert from "node:assert/strict";
import { it } from "node:test";
import { type ProbeEvent, ProbeBus, summarizeLogits } from "../src/index.js";

const tokenEvent = (step: number): ProbeEvent => ({
  kind: "token",
  phase: "decode",
  step,
  payload: { id: step, text: "x", position: step },
});
const memoryEvent: ProbeEvent = { kind: "memory", phase: "prefill", step: 0, payload: { activeBytes: 1, peakBytes: 2 } };

it("ProbeBus fans out to every sink, filters by kinds, and survives a throwing sink", () => {
  const all: ProbeEvent[] = [];
  const tokensOnly: ProbeEvent[] = [];
  const failure = new Error("sink exploded");
  const bus = new ProbeBus([
    () => {
      throw failure;
    },
    (event) => all.push(event),
    { kinds: ["token"], emit: (event) => tokensOnly.push(event) },
  ]);
  assert.equal(bus.active, true);
  bus.emit(tokenEvent(1));
  bus.emit(memoryEvent);
  bus.emit(tokenEvent(2));
  assert.deepEqual(all, [tokenEvent(1), memoryEvent, tokenEvent(2)]);
  assert.deepEqual(tokensOnly, [tokenEvent(1), tokenEvent(2)]);
  assert.deepEqual(bus.errors, [failure], "a failing sink is reported once");
  let calls = 0;
  const flaky = new ProbeBus([
    () => {
      calls++;
      throw new Error(`fail ${calls}`);
    },
    () => {
      throw new Error("other sink");
    },
  ]);
  for (let i = 0; i < 1000; i++) flaky.emit(tokenEvent(i));
  assert.equal(calls, 1000, "a failing sink still receives events");
  assert.deepEqual(
    flaky.errors.map((e) => (e as Error).message),
    ["fail 1", "other sink"],
  );
});

it("ProbeBus reports whether anyone listens, and for which kinds", () => {
  assert.equal(new ProbeBus(undefined).active, false);
  assert.equal(new ProbeBus(undefined).wants("token"), false);
  const filtered = new ProbeBus({ kinds: ["logits"], emit: () => undefined });
  assert.equal(filtered.wants("logits"), true);
  assert.equal(filtered.wants("attention"), false);
  assert.equal(new ProbeBus({ emit: () => undefined }).wants("attention"), true);
  assert.equal(new ProbeBus(() => undefined).wants("memory"), true);
});

/** Entropy of softmax(logits) in nats, the textbook way: -sum p log p. */
function directEntropy(logits: number[]): number {
  const max = Math.max(...logits);
  const exps = logits.map((l) => Math.exp(l - max));
  const z = exps.reduce((a, b) => a + b, 0);
  return -exps.reduce((h, e) => (e > 0 ? h + (e / z) * Math.log(e / z) : h), 0);
}

/** Top-k by sorting indices, ties to the lower index. */
function directTopK(logits: number[], k: number): number[] {
  return [...logits.keys()].sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, k);
}

it("summarizeLogits matches a direct computation of top-k and entropy", () => {
  let state = 7;
  const random = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 20 - 10;
  for (const size of [1, 2, 5, 100, 1000]) {
    const logits = Array.from({ length: size }, random);
    for (const k of [1, 3, 5, 10]) {
      const summary = summarizeLogits(Float32Array.from(logits), k);
      const f32 = Array.from(Float32Array.from(logits));
      assert.deepEqual(summary.topIds, directTopK(f32, k), `size ${size}, k ${k}`);
      assert.deepEqual(summary.topLogits, summary.topIds.map((i) => f32[i]));
      assert.ok(Math.abs(summary.entropy - directEntropy(f32)) < 1e-9, `entropy size ${size}`);
      assert.equal(summary.vocabSize, size);
    }
  }
});

it("summarizeLogits: uniform, one-hot, ties, masked and empty inputs", () => {
  const uniform = summarizeLogits(new Float32Array(64), 3);
  assert.ok(Math.abs(uniform.entropy - Math.log(64)) < 1e-12);
  assert.deepEqual(uniform.topIds, [0, 1, 2]);
  const peaked = summarizeLogits([0, 1000, 0], 1);
  assert.deepEqual(peaked.topIds, [1]);
  assert.ok(Math.abs(peaked.entropy) < 1e-12);
  const masked = summarizeLogits([1, -Infinity, 1, -Infinity], 2);
  assert.ok(Math.abs(masked.entropy - Math.log(2)) < 1e-12, `entropy ${masked.entropy}`);
  assert.deepEqual(masked.topIds, [0, 2]);
  const empty = summarizeLogits([], 5);
  assert.deepEqual(empty, { topIds: [], topLogits: [], entropy: 0, vocabSize: 0 });
  assert.deepEqual(summarizeLogits([3, 1, 2]).topIds, [0, 2, 1]);
});
